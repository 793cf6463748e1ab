"""A failed check in words a user can act on: the first violation's token with its p and q, and the known defect
class the failure fits, with its fix."""

from __future__ import annotations

import re

_SAID = ("scenario", "chunk", "row", "output", "draft_tokens", "position", "token", "p", "q", "drafted", "p_drafted",
         "q_drafted")  # fmt: skip


def example_words(e: dict) -> str:
    """A T0 check's first violation in words: where, what was emitted, and the offending token with its p and q."""
    where = ", ".join(f"{k} {e[k]}" for k in ("scenario", "chunk", "row") if k in e)
    words = where + (f": emitted {[t for t in e['output'] if t != -1]}" if "output" in e else "")
    words += f" after drafts {e['draft_tokens']}" if "draft_tokens" in e else ""
    if "token" in e:
        q = "" if e.get("q") is None else f", q = {e['q']:.4g}"
        qd = "" if e.get("q_drafted") is None else f", q = {e['q_drafted']:.4g}"
        words += (f"; at position {e['position']} it emitted token {e['token']} (p = {e['p']:.4g}{q}) after "
                  f"rejecting draft {e['drafted']} (p = {e['p_drafted']:.4g}{qd})")  # fmt: skip
        if e.get("q") is not None and e["p"] <= e["q"]:
            words += ("; a correction where p <= q, outside max(0, p - q): the correction is not drawn from the "
                      "residual max(0, p - q) / Z (known defect class: draw it from the residual)")  # fmt: skip
    rest = {k: v for k, v in e.items() if k not in _SAID}
    return words + (f" ({', '.join(f'{k} {v}' for k, v in rest.items())})" if rest else "") if words else str(e)


def defect_words(edge: str) -> str:
    """The known defect class a rare edge's line fits, with its fix (for a located line `at path:N: code` of a
    non-strict comparison, that line made strict)."""
    if "<=" in edge or ">=" in edge:
        site = re.search(r"at (\S+:\d+): (.*?)(?:;|$)", edge)
        code = site.group(2).strip() if site else ""
        here = f"; at {site.group(1)}: `{code.replace('<=', '<').replace('>=', '>')}`" if "=" in code[:-1] else ""
        return f" (known defect class: a non-strict accept test; use `u < p/q`{here})"
    if "searchsorted" in edge:
        return " (known defect class: a left-side inverse CDF; search with side='right' over the cumulative weights)"
    return ""


__all__ = ["defect_words", "example_words"]
