"""The expert: the gold decomposition of a question as the two agents' actions.

Useful for behaviour-cloning warm starts and as the upper bound in evaluation. The actions decode
(:func:`.actions.decode`) to exactly the question's gold plan, so they render to the gold SQL.
"""

from __future__ import annotations

import numpy as np

from orchestrl.envs.text2sql.actions import COMPOSER, EXTRACTOR
from orchestrl.envs.text2sql.query import LIMITS, QueryPlan
from orchestrl.envs.text2sql.questions import Question


def encode_plan(plan: QueryPlan, question: Question) -> dict[str, np.ndarray]:
    """The joint action that decodes to ``plan`` for ``question`` (the inverse of ``decode``).

    Components a plan leaves unused (the operator and value without WHERE) are 0.
    """
    start, length = question.value_span if plan.where and question.value_span else (0, 1)
    extractor = [plan.table, int(plan.join), plan.select, plan.where, plan.group_by, plan.order_by]
    composer = [
        int(plan.agg),
        int(plan.op) if plan.where else 0,
        start,
        length - 1,
        int(plan.order),
        LIMITS.index(plan.limit),
    ]
    return {EXTRACTOR: np.array(extractor, dtype=np.int64), COMPOSER: np.array(composer, dtype=np.int64)}


def expert_actions(question: Question) -> dict[str, np.ndarray]:
    """The gold decomposition of ``question``: one ``MultiDiscrete`` action per agent."""
    return encode_plan(question.plan, question)
