"""keepon-plan: from flow specifications to a verified keepon slot plan.

Modules: ``model`` (flow sets, slot-level problem), ``params`` (slot/ring/batch selection, paper A.10),
``isolation`` (capacity bound, closed form, CP-SAT), ``verify`` (solver-free checker), ``emit`` (runtime config and
gate list), ``gen`` (Table 5-like flow sets), ``z3baseline`` (the paper's Z3 approach), ``bench``, ``cli``.
"""

__version__ = "0.1.0"
