"""Deprecated: the module aifs.plan under its old name, kept for one release (aifs 0.1.x).
Install the package (pip install --no-build-isolation ./python) and import aifs.plan."""

import sys
import warnings

warnings.warn("aifs_plan is deprecated: use the package aifs (from aifs import plan; aifs.DistributedSampler)",
              DeprecationWarning, stacklevel=2)

from aifs import plan as _plan  # noqa: E402

sys.modules[__name__] = _plan
