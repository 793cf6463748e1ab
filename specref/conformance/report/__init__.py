"""Rendering a run's record: report.md, report.json, the plots and the snippets (render.py).

The record itself (Report, the verdicts) is the engine's (engine/report.py); its names are re-exported here, at the
path earlier releases had, for one release."""

from ..engine.check_words import check_record  # noqa: F401
from ..engine.report import *  # noqa: F403
from ..engine.report import CONFORMING, LOSSY, NON_CONFORMING, RARE_EDGE, Report  # noqa: F401
