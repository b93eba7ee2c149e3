"""The cut that cuts: with messages cut, an agent's action depends on nothing but its own
observation; with ``observe: inputs`` a later agent does not read its observation at all (its pointer
keys are content-free), so what it does comes from its messages alone."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from neuromas_helpers import small_experiment

from orchestrl.algorithms.neuromas.network import NeuromasNet
from orchestrl.algorithms.neuromas.team_env import TEAM
from orchestrl.envs.spaces import MASK_KEY, OBS_KEY
from orchestrl.envs.text2sql.actions import COMPOSER, EXTRACTOR, NVEC
from orchestrl.envs.text2sql.env import Text2SQLEnv
from orchestrl.envs.text2sql.observation import LAYOUT, WORD_PIECES
from orchestrl.envs.text2sql.tokenizer import pieces_of
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config

AGENTS = (EXTRACTOR, COMPOSER)


def team(messages: str, observe: str, data_dir: Path) -> NeuromasNet:
    """NeuroMAS-3 on Text2SQL built as ``orchestrl train`` builds it from an experiment's
    ``algorithm:`` section (config -> RLlib module spec -> module), with every parameter moved off
    its initialisation (no path is zero)."""
    data = small_experiment("text2sql", data_dir, messages=messages, observe=observe, word_vectors=True)
    torch.manual_seed(0)
    net = build_ppo_config(validate_config(data)).get_multi_rl_module_spec().build()[TEAM].net
    with torch.no_grad():
        for p in net.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    return net.eval()


@pytest.fixture(scope="module")
def observations(t2s_data_dir: Path) -> dict[str, dict[str, torch.Tensor]]:
    env = Text2SQLEnv(split="train", data_dir=t2s_data_dir)
    index = next(i for i, q in enumerate(env.questions) if q.kind == "count_where")
    obs, _ = env.reset(options={"question_index": index})
    return {a: {k: torch.as_tensor(v)[None] for k, v in obs[a].items()} for a in AGENTS}


def changed_word(obs: torch.Tensor, word: int = 1) -> torch.Tensor:
    """``obs`` with one question word replaced by another (only its pieces change)."""
    other = obs.clone()
    pieces = LAYOUT.view(other, "question_pieces")
    pieces[0, word] = torch.tensor(pieces_of(["penguin"], WORD_PIECES), dtype=other.dtype)
    assert not torch.equal(other, obs)
    return other


def logits(net: NeuromasNet, obs: dict[str, dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    with torch.no_grad():
        out = net({a: o[OBS_KEY] for a, o in obs.items()}, {a: o[MASK_KEY] for a, o in obs.items()})
    split = sum(NVEC[EXTRACTOR])
    return {EXTRACTOR: out.env_logits[:, :split], COMPOSER: out.env_logits[:, split:]}


def with_obs(observations: dict, agent: str, obs: torch.Tensor) -> dict:
    return {**observations, agent: {**observations[agent], OBS_KEY: obs}}


@pytest.mark.parametrize("observe", ["all", "inputs"])
def test_cut_a_word_only_the_extractor_sees_does_not_move_the_composer(
    observations: dict, observe: str, t2s_data_dir: Path
) -> None:
    net = team("none", observe, t2s_data_dir)
    before = logits(net, observations)
    after = logits(net, with_obs(observations, EXTRACTOR, changed_word(observations[EXTRACTOR][OBS_KEY])))
    assert not torch.allclose(after[EXTRACTOR], before[EXTRACTOR])  # the change matters to who sees it
    torch.testing.assert_close(after[COMPOSER], before[COMPOSER], rtol=0, atol=0)


def test_observe_inputs_the_composer_reads_nothing_not_even_through_its_pointer(
    observations: dict, t2s_data_dir: Path
) -> None:
    """Its own question words do not move any of its logits, the value pointer's included."""
    net = team("none", "inputs", t2s_data_dir)
    before = logits(net, observations)
    after = logits(net, with_obs(observations, COMPOSER, changed_word(observations[COMPOSER][OBS_KEY])))
    torch.testing.assert_close(after[COMPOSER], before[COMPOSER], rtol=0, atol=0)


def test_observe_all_the_composer_reads_its_own_words(observations: dict, t2s_data_dir: Path) -> None:
    net = team("none", "all", t2s_data_dir)
    before = logits(net, observations)
    after = logits(net, with_obs(observations, COMPOSER, changed_word(observations[COMPOSER][OBS_KEY])))
    assert not torch.allclose(after[COMPOSER], before[COMPOSER])
    torch.testing.assert_close(after[EXTRACTOR], before[EXTRACTOR], rtol=0, atol=0)  # and nobody else does


def test_with_messages_the_extractors_words_reach_the_composer(
    observations: dict, t2s_data_dir: Path
) -> None:
    """The same change, with messages on: the cut above is what stopped it."""
    net = team("continuous", "inputs", t2s_data_dir)
    before = logits(net, observations)
    after = logits(net, with_obs(observations, EXTRACTOR, changed_word(observations[EXTRACTOR][OBS_KEY])))
    assert not torch.allclose(after[COMPOSER], before[COMPOSER])
