"""One-off: rewrite committed report.html pages (written when plots were embedded as base64) to link the
plots/NAME.png beside them, where the embedded bytes equal that png; nothing else in a page changes.

    python benchmarks/unembed_reports.py reports/*/report.html
"""

import sys
from pathlib import Path

from toolkit.results.report.render import unembed_html

if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(f"{arg}: {unembed_html(Path(arg))} plot(s) linked")
