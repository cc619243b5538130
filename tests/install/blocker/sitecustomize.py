"""Loaded by every Python started with this folder on PYTHONPATH (the CLI and its children): makes the
modules in $TOOLKIT_TEST_BLOCK unimportable and the tools in $TOOLKIT_TEST_NO_TOOLS absent from PATH, as
on a machine where an extra was never installed."""

import os
import shutil
import sys

for _name in filter(None, os.environ.get("TOOLKIT_TEST_BLOCK", "").split(",")):
    sys.modules[_name] = None  # `import name` raises ModuleNotFoundError; find_spec finds nothing

_absent = set(filter(None, os.environ.get("TOOLKIT_TEST_NO_TOOLS", "").split(",")))
if _absent:
    _which = shutil.which

    def _which_without(cmd, mode=os.F_OK | os.X_OK, path=None):
        return None if os.path.basename(str(cmd)) in _absent else _which(cmd, mode, path)

    shutil.which = _which_without
