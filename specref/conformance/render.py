"""Rendering a run's report (report/render.py), at the path earlier releases documented: `python -m
specref.conformance.render [reports]` re-renders every report.md from its report.json."""

import sys

from .report.render import failure_section, rebuild, render_markdown, write_index, write_plots, write_report

__all__ = ["failure_section", "rebuild", "render_markdown", "write_index", "write_plots", "write_report"]

if __name__ == "__main__":
    print(rebuild(sys.argv[1] if len(sys.argv) > 1 else "reports"))
