"""Deprecated: the module aifs.direct under its old name, kept for one release (aifs 0.1.x).
Install the package (pip install --no-build-isolation ./python) and import aifs.direct."""

import sys
import warnings

warnings.warn("aifs_direct is deprecated: use the package aifs (from aifs import direct)",
              DeprecationWarning, stacklevel=2)

from aifs import direct as _direct  # noqa: E402

sys.modules[__name__] = _direct
