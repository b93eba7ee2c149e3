"""``orchestrl ask``: a trained NeuroMAS Text2SQL team answers a question about a SQLite file.

Prints the SQL the team wrote, then one line per result row (values separated by `` | ``) and the
row count. Bad input (a missing or unreadable file, a schema or question beyond the action space's
limits, a checkpoint that holds no Text2SQL team) is one line on stderr and exit code 2; SQL that
SQLite rejects is printed with SQLite's error and exit code 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def ask_command(
    question: Annotated[str, typer.Argument(help="The question, in English.")],
    checkpoint: Annotated[
        Path, typer.Option("--checkpoint", help="A trained NeuroMAS Text2SQL run checkpoint or module dir.")
    ],
    db: Annotated[Path, typer.Option("--db", help="The SQLite file to ask about (opened read-only).")],
    free_decoding: Annotated[
        bool,
        typer.Option(
            "--free-decoding",
            help="Each action component's own argmax, without constrained decoding (the WHERE column "
            "one the question names a value of, the value the best span that fits it).",
        ),
    ] = False,
) -> None:
    """Ask a trained NeuroMAS Text2SQL team a question about a SQLite file: prints the SQL and its rows."""
    from orchestrl.apps.text2sql.ask import CheckpointError, Database, Team
    from orchestrl.envs.text2sql.observation import LimitError, check_question
    from orchestrl.envs.text2sql.tokenizer import split_words

    try:
        check_question(split_words(question))
        database = Database.open(db)
        answer = Team.load(checkpoint, constrained=not free_decoding).ask(database, question)
    except (FileNotFoundError, LimitError, CheckpointError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"SQL: {answer.sql if answer.sql is not None else '(none)'}")
    if answer.error is not None:
        typer.echo(f"error: {answer.error}", err=True)
        raise typer.Exit(1)
    for row in answer.rows:
        typer.echo(" | ".join(str(v) for v in row))
    typer.echo(f"({len(answer.rows)} row{'s' if len(answer.rows) != 1 else ''})")
