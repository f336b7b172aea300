"""robusteval: attack, guard and harden automatic NLG evaluators.

Stable API (DESIGN.md): ``Sample``, ``robusteval.data.load``, ``robusteval.metrics.load``,
``robusteval.metrics.names``. Subpackages import lazily; nothing here touches the network.
"""

from __future__ import annotations

from robusteval.types import HumanScale, Sample

__version__ = "0.1.0"
__all__ = ["HumanScale", "Sample", "__version__"]
