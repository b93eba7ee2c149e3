"""Shared fixtures: one generated bank of databases per test session, under pytest's tmp dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrl.envs.text2sql.bank import QuestionBank, load_bank


@pytest.fixture(scope="session")
def bank_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("text2sql_bank")


@pytest.fixture(scope="session")
def bank(bank_dir: Path) -> QuestionBank:
    return load_bank(0, bank_dir)
