"""COMA's Q heads on the orchestration action: how well each one predicts the team return of the
taken joint action on episodes it was not fitted on, and how well the advantage built from it
agrees with the exact counterfactual advantage, re-executed.

The probe behind ``q_head`` (``orchestrl/algorithms/coma/module.py``) and behind COMA's failure at
level 3. Per seed it plays ``--steps`` env steps with the credit benchmark's warm-started actor
(the expert cloned on 100 training tasks for 6 epochs, sampling), builds COMA's critic input
(global state + the other agents' one-hot actions) with the learner's own connector pipeline, and
fits a fresh critic per head (the module's MLP, 256-256, Adam at COMA's critic lr 1e-3,
minibatches of 250) by regression on the Monte-Carlo team return-to-go (gamma 0.99: what
TD(lambda) targets average to) of the first half of the episodes. Reported per head: explained
variance on the fitted rows and on the other half's rows (other episodes, mostly of other tasks of
the 1,000-task pool), after each ``--report-every`` steps, IQM over seeds.

With ``--replay-episodes N``, on N episodes of the other half it plays each episode again in a
fresh env (same task, same actions, same score) and, for each agent's final-round action u_i,
re-executes the spec with u_i replaced by ``--samples`` draws u'_i ~ pi_i (LEMON's alternative
edit): ``R(spec) - mean R(edited)`` estimates Eq. (4)'s A_i with the true Q. Reported: the Pearson
correlation of that exact advantage with each advantage an actor could be given (``coma/<head>``:
Eq. 4 with the fitted critic; ``coma_cv/<head>``: the sampled return minus c_i times the critic's
baseline, before coma_cv's per-agent centring; ``team_score``: the episode's final score,
centred), the exact estimate's split-half correlation (how much of it is sampling noise), and the
share of final rows whose team reward is 0.

Run:
    .venv/bin/python benchmarks/coma_heads.py                      # level 3, 3 seeds
    .venv/bin/python benchmarks/coma_heads.py --replay-episodes 60  # + exact advantages (longer)
    .venv/bin/python benchmarks/coma_heads.py --level 4 --seeds 5

Expected: the JSON it prints (explained variance per head after each ``--report-every`` steps,
fitted and held out; with ``--replay-episodes``, each advantage's correlation with the exact one
and the exact estimate's split-half correlation). No output of it is saved yet, so
``benchmarks/RESULTS.md`` has none of its figures: save one under ``benchmarks/results/`` and add
it to ``benchmarks/results.py`` to publish them.

What the probe can show about Eq. 4: when the final round's team reward (the improvement over the
first round's score) is 0 on the replayed rows, as when the warm-started team writes the same spec
twice, the critic's Q(s, u) of a final action is fitted to that 0, so Eq. 4's advantage is the
critic's error on the taken action minus its baseline. With the sampled return (0) in place of
Q(s, u), coma_cv's advantage is minus the scaled baseline; the team's final score is the same for
every agent of an episode. The correlations say how much of the exact advantage each keeps.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

HEADS = ("factorised", "paired", "joint")


def returns_to_go(batch: dict[str, Any], gamma: float) -> np.ndarray:
    """Per real row, the discounted team return from that step to the episode's end."""
    from orchestrl.algorithms.joint_columns import TEAM_REWARD

    rewards = batch[TEAM_REWARD].numpy()
    real = batch["loss_mask"].numpy().astype(bool)
    terminated = batch["terminateds"].numpy()
    out, g = np.zeros_like(rewards), 0.0
    for i in range(len(rewards) - 1, -1, -1):  # each agent episode's rows are contiguous
        g = 0.0 if not real[i] else rewards[i] + gamma * g * (1.0 - terminated[i])
        out[i] = g
    return out[real]


def logit_lens(trainer: Any) -> list[int]:
    """Logits per action component of the shared module (COMA's Q head and pi_i are laid out by it)."""
    from orchestrl.algorithms.actor_critic import action_logit_lens

    return action_logit_lens(trainer.learner.module["shared"].action_space)


def critic_rows(trainer: Any, episodes: list, final_only: bool = False) -> dict[str, Any]:
    """The real rows of ``episodes`` (or only each agent's final-round row: the actions an exact
    replay can edit) through the learner's pipeline: critic input ``x`` (global state + the
    others' one-hot actions), ``actions``, ``probs`` (pi_i per component), ``agent`` index and the
    team ``return`` to go."""
    import torch
    from ray.rllib.core.columns import Columns

    from orchestrl.algorithms.actor_critic import GLOBAL_STATE
    from orchestrl.algorithms.coma.advantage import policy_probs
    from orchestrl.algorithms.joint_columns import AGENT_INDEX, OTHERS_ACTIONS

    batch = trainer.learner_batch(episodes)["shared"]
    real = batch["loss_mask"].bool()
    keep = (
        (real & batch[Columns.TERMINATEDS].bool())[real]
        if final_only
        else torch.ones(int(real.sum()), dtype=torch.bool)
    )
    lens = logit_lens(trainer)
    x = torch.cat([batch[GLOBAL_STATE].float(), batch[OTHERS_ACTIONS].float()], dim=1)
    return {
        "x": x[real][keep],
        "actions": batch[Columns.ACTIONS][real][keep],
        "probs": policy_probs(batch[Columns.ACTION_DIST_INPUTS][real][keep].float(), lens),
        "agent": batch[AGENT_INDEX][real][keep].long(),
        "return": torch.as_tensor(returns_to_go(batch, 0.99))[keep],
    }


def explained_variance(y: Any, prediction: Any) -> float:
    return 1.0 - float((y - prediction).var() / y.var())


def fit_heads(
    train: tuple, heldout: tuple, logit_lens: list[int], steps: int, every: int, seed: int
) -> tuple[dict[str, list[list[float]]], dict[str, Any]]:
    """(head -> [[step, fitted-rows EV, held-out EV], ...], head -> its fitted critic)."""
    import torch

    from orchestrl.algorithms.coma.module import QHead, q_critic

    x, actions, y = train["x"], train["actions"], train["return"]
    x_out, actions_out, y_out = heldout["x"], heldout["actions"], heldout["return"]
    out: dict[str, list[list[float]]] = {}
    nets: dict[str, Any] = {}
    for kind in HEADS:
        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        head = QHead.of(logit_lens, kind)
        net = q_critic(x.shape[1], [256, 256], head)
        optimiser = torch.optim.Adam(net.parameters(), lr=1e-3)
        out[kind] = []
        for step in range(1, steps + 1):
            rows = torch.as_tensor(rng.integers(0, len(y), 250))
            loss = ((head.taken(net(x[rows]), actions[rows]) - y[rows]) ** 2).mean()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            if step % every == 0:
                with torch.no_grad():
                    fitted = explained_variance(y, head.taken(net(x), actions))
                    held = explained_variance(y_out, head.taken(net(x_out), actions_out))
                out[kind].append([step, fitted, held])
        nets[kind] = net
    return out, nets


def exact_advantages(
    env: Any, episode: Any, rows: dict[str, Any], lens: list[int], samples: int, rng: np.random.Generator
) -> np.ndarray | None:
    """Per final row, ``R(spec) - R(spec with agent i's action replaced by u'_i)`` for ``samples``
    draws ``u'_i ~ pi_i``, re-executed for real (``env.replay``, LEMON's alternative edit):
    ``[rows, samples]``, whose row mean estimates Eq. (4)'s A_i with the true Q. None when the
    episode's final spec was invalid (nothing to edit). The episode is played again in ``env`` from
    its task seed and its actions; its score must come out the same."""
    from orchestrl.envs.counterfactual import Edit, EditFamily
    from orchestrl.envs.orchestration.actions import agent_id

    agents = list(episode.agent_episodes)
    record = episode_record(episode)
    env.reset(options={"task_seed": record["seed"]})
    for t in range(len(episode)):
        env.step({a: episode.agent_episodes[a].get_actions(t) for a in agents})
    if abs(env.last_score.total - record["score"]) > 1e-6:
        raise RuntimeError(
            f"replaying task {record['seed']} scored {env.last_score.total}, not {record['score']}"
        )
    spec = env.counterfactual_spec()
    if spec is None:
        return None
    out = np.zeros((len(rows["agent"]), samples))
    parts = np.split(rows["probs"].numpy().astype(np.float64), np.cumsum(lens)[:-1], axis=1)
    for r, slot in enumerate(rows["agent"].tolist()):
        for k in range(samples):
            action = np.array([rng.choice(len(p[r]), p=p[r] / p[r].sum()) for p in parts])
            out[r, k] = env.replay(spec, agent_id(slot), Edit(EditFamily.ALTERNATIVE, action=action)).delta
    return out


def episode_record(episode: Any) -> dict[str, Any]:
    """The env's record of a finished episode (task seed, final actions, final score)."""
    return next(i["episode"] for i in episode.get_infos(-1).values() if "episode" in i)


def correlation(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(a, b)[0, 1]) if a.std() > 0 and b.std() > 0 else 0.0


def advantage_agreement(
    trainer: Any,
    bench: Any,
    episodes: list,
    nets: dict[str, Any],
    fitted: dict[str, Any],
    samples: int,
    seed: int,
) -> dict[str, Any]:
    """How well each advantage an actor could be given predicts the exact one, on ``episodes``
    (never fitted on): Pearson correlation with the row mean of :func:`exact_advantages`, and the
    exact estimate's own split-half correlation (how much of it is sampling noise).

    - ``coma/<head>``: Eq. (4) with the fitted critic, ``Q(s, u) - sum_u' pi_i(u') Q(s, (u_-i, u'))``;
    - ``coma_cv/<head>``: ``coma_cv``'s default before its per-agent centring, the sampled return
      minus ``c_i`` times that baseline, ``c_i`` fitted on the critic's fitting rows
      (:func:`control_variate_scale`);
    - ``team_score``: the episode's final score R(spec), centred: the same number for every agent
      of an episode, what a team-reward policy gradient weighs the episode's actions by;
    - ``team_return``: the final row's return-to-go (the last round's improvement; 0 when the team
      repeats its spec, see ``final_return_zero_share``), centred.
    """
    import torch

    from orchestrl.algorithms.coma.advantage import coma_advantages, control_variate_scale
    from orchestrl.algorithms.coma.module import QHead
    from orchestrl.envs.orchestration.env import OrchestrationEnv

    lens = logit_lens(trainer)
    env = OrchestrationEnv(**bench.kwargs)
    rng = np.random.default_rng(seed)
    rows, exact, scores = [], [], []
    try:
        for episode in episodes:
            r = critic_rows(trainer, [episode], final_only=True)
            e = exact_advantages(env, episode, r, lens, samples, rng)
            if e is not None:
                rows.append(r)
                exact.append(e)
                scores += [episode_record(episode)["score"]] * len(e)
    finally:
        env.close()
    cat = {k: torch.cat([r[k] for r in rows]) for k in rows[0]}
    exact_all = np.concatenate(exact)
    target = exact_all.mean(axis=1)
    half = samples // 2
    out: dict[str, Any] = {
        "rows": len(target),
        "episodes_replayed": len(rows),
        "exact_split_half_corr": correlation(exact_all[:, :half].mean(1), exact_all[:, half:].mean(1)),
        "exact_nonzero_share": float(np.mean(np.abs(target) > 1e-9)),
        "final_return_zero_share": float(np.mean(np.abs(cat["return"].numpy()) < 1e-9)),
        "team_score": correlation(np.asarray(scores) - np.mean(scores), target),
        "team_return": correlation(cat["return"].numpy() - cat["return"].numpy().mean(), target),
    }
    with torch.no_grad():
        for kind, net in nets.items():
            head = QHead.of(lens, kind)
            a, q = coma_advantages(net(cat["x"]), cat["probs"], cat["actions"], head)
            out[f"coma/{kind}"] = correlation(a.numpy(), target)
            a_fit, q_fit = coma_advantages(net(fitted["x"]), fitted["probs"], fitted["actions"], head)
            agents_fit = fitted["agent"].numpy()
            scale = control_variate_scale(
                fitted["return"].numpy(), (q_fit - a_fit).numpy(), agents_fit, np.ones(len(agents_fit), bool)
            )
            c = np.array([scale.get(int(i), 1.0) for i in cat["agent"].tolist()])
            out[f"coma_cv/{kind}"] = correlation(cat["return"].numpy() - c * (q - a).numpy(), target)
    return out


def probe(
    level: int,
    env_steps: int,
    fit_steps: int,
    every: int,
    seed: int,
    replay_episodes: int = 0,
    samples: int = 8,
) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # the credit benchmark's settings
    import credit
    import torch

    from orchestrl.experiment.builder import build_ppo_config
    from orchestrl.experiment.config import validate_config
    from orchestrl.training.inprocess import InProcessTrainer

    torch.set_num_threads(1)
    bench = credit.benches(quick=False)[f"orchestration_l{level}"]
    trainer = InProcessTrainer(build_ppo_config(validate_config(credit.experiment(bench, "coma", seed))))
    try:
        episodes = [ep for ep in credit.sample(trainer.runner, env_steps) if ep.is_done]
        half = len(episodes) // 2
        train, heldout = critic_rows(trainer, episodes[:half]), critic_rows(trainer, episodes[half:])
        lens = logit_lens(trainer)
        curves, nets = fit_heads(train, heldout, lens, fit_steps, every, seed)
        out = {"rows": [len(train["return"]), len(heldout["return"])], "curves": curves}
        if replay_episodes:
            replayed = episodes[half : half + replay_episodes]
            out["agreement"] = advantage_agreement(trainer, bench, replayed, nets, train, samples, seed)
    finally:
        trainer.stop()
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--level", type=int, default=3, choices=(2, 3, 4))
    parser.add_argument("--steps", type=int, default=3000, help="env steps played per seed")
    parser.add_argument("--fit-steps", type=int, default=400, help="Adam steps per head")
    parser.add_argument("--report-every", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--replay-episodes",
        type=int,
        default=0,
        help="also compare each advantage with the exact one, replayed on this many unfitted episodes a seed",
    )
    parser.add_argument("--samples", type=int, default=8, help="alternatives u'_i ~ pi_i replayed per row")
    args = parser.parse_args(argv)
    if args.steps < 100 or args.fit_steps < args.report_every:
        parser.error("--steps must be >= 100 and --fit-steps >= --report-every")
    if args.replay_episodes < 0 or args.samples < 2:
        parser.error("--replay-episodes must be >= 0 and --samples >= 2")
    from orchestrl.tracking.stats import aggregate

    per_seed = [
        probe(
            args.level, args.steps, args.fit_steps, args.report_every, s, args.replay_episodes, args.samples
        )
        for s in range(args.seeds)
    ]
    summary: dict[str, Any] = {}
    for kind in HEADS:
        points = []
        for i, (step, _, _) in enumerate(per_seed[0]["curves"][kind]):
            fitted = [run["curves"][kind][i][1] for run in per_seed]
            held = [run["curves"][kind][i][2] for run in per_seed]
            points.append(
                {
                    "fit_step": step,
                    "fitted_ev_iqm": aggregate(fitted, seed=0).iqm.value,
                    "heldout_ev_iqm": aggregate(held, seed=0).iqm.value,
                    "heldout_ev_per_seed": held,
                }
            )
        summary[kind] = points
    result = {
        "level": args.level,
        "env_steps_per_seed": args.steps,
        "rows_fitted_heldout_per_seed": [r["rows"] for r in per_seed],
        "heads": summary,
    }
    if args.replay_episodes:
        agreement = [run["agreement"] for run in per_seed]
        result["advantage_agreement"] = {
            key: {
                "iqm": aggregate([a[key] for a in agreement], seed=0).iqm.value,
                "per_seed": [a[key] for a in agreement],
            }
            for key in agreement[0]
        }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
