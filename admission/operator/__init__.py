"""The operator: caches fed by list+watch, one admission loop that decides and writes, leader election.

Only `writer` and `leader` write to the API; `cache` only reads; `world` turns the cache into the
pure core's inputs; `loop` runs cycles.
"""

from admission.operator.loop import Operator
from admission.operator.settings import OperatorSettings

__all__ = ["Operator", "OperatorSettings"]
