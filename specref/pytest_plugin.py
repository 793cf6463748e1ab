"""pytest plugin: a conformance run as test items, one per check, for engine developers' own CI.

    pytest --specref-impl pkg.module:verify            # or path/to/file.py:attr, or a built-in name
    pytest --specref-impl batched --specref-rows 20000 --specref-scenarios cf_dense_g4,markov_g5

IMPL is resolved exactly as `specref conform IMPL` resolves it. The run happens once, at collection; each check
becomes an item `specref[<impl>]::<check>[<scenario>]`, rendered from the check's record in report.json (the one
record every output reads): a failure shows the check, its p-value, the detectable TV and a snippet that rebuilds
the failing batch; a check that was not run is a failure with its reason; a check that could not fail (not tested:
it spent no alpha) is skipped with its reason. The verdict and the summary (Report.summary(), the counts the
terminal and report.md state) are printed at the end of the session.

Settings come from `--specref-*` options, then from `[tool.specref]` in the project's pyproject.toml (options win):

    [tool.specref]
    impl = "mypkg.spec:verify"     # optional: without it (and without --specref-impl) the plugin adds no items
    seed = 0
    budget-seconds = 120
    alpha = 1e-3                   # the run's family-wise false-alarm probability
    rows = 20000                   # fixed rows per scenario (reproducible N) instead of sizing by time
    tv = 0.05                      # or: size every scenario so that each check detects TV 0.05 (power 0.999)
    scenarios = ["cf_dense_g4", "markov_g5"]
    report = "specref-reports/mine"  # the report folder (default specref-reports/<impl>/, as `specref conform`)

The `specref_conformance` fixture returns `run(verify=None, **overrides)`, `specref.conformance.run` with these
settings as defaults; `verify` is an IMPL string or a verify function / adapter, and it returns the Report.
Registered through the `pytest11` entry point; without installing specref, load it with `-p specref.pytest_plugin`.
"""

from __future__ import annotations

import dataclasses
import math
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

from . import arguments
from .errors import SpecrefError, UsageError

#: [tool.specref] key -> Settings field; the keys are spelled as the CLI flags.
KEYS = {
    "impl": "impl",
    "seed": "seed",
    "budget-seconds": "budget_seconds",
    "alpha": "alpha",
    "rows": "rows",
    "tv": "tv",
    "scenarios": "scenarios",
    "report": "report",
}


@dataclass(frozen=True)
class Settings:
    impl: str | None = None
    seed: int = 0
    budget_seconds: float | None = None  # None: 300 s, or no time cap when rows are fixed (as the CLI)
    alpha: float = 1e-3
    rows: int | None = None
    tv: float | None = None  # size every scenario to detect this TV at power 0.999 (`specref conform --tv`)
    scenarios: str | list | None = None  # a list, or comma-separated as `specref conform --scenarios`
    report: str | None = None  # the report folder (default specref-reports/<impl>/, as `specref conform`)

    def validate(self) -> Settings:
        """The checks run() and the CLI make (specref.arguments), named as [tool.specref] spells the keys."""
        try:
            arguments.budget_seconds(self.budget_seconds, "budget-seconds")
            arguments.alpha(self.alpha, "alpha")
            arguments.rows(self.rows, "rows")
            arguments.tv(self.tv, "tv")
            arguments.tv_or_rows(self.tv, self.rows)
            arguments.seed(self.seed, "seed")
            scenarios = arguments.scenarios(self.scenarios, "scenarios")
        except UsageError as error:
            raise pytest.UsageError(f"specref: {error}") from None
        return dataclasses.replace(self, scenarios=scenarios) if scenarios != self.scenarios else self


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("specref", "specref conformance (options override [tool.specref] in pyproject.toml)")
    group.addoption(
        "--specref-impl",
        metavar="IMPL",
        help="run the conformance suite on IMPL: a built-in name, package.module:attr or path/file.py:attr",
    )
    group.addoption("--specref-seed", type=int, metavar="N", help="seed of the scenarios and generators (default 0)")
    group.addoption("--specref-budget-seconds", type=float, metavar="S",
                    help="time budget; N per check is sized to it (default 300; none with rows)")  # fmt: skip
    group.addoption("--specref-alpha", type=float, metavar="A",
                    help="family-wise false-alarm probability of the run (default 1e-3)")  # fmt: skip
    group.addoption("--specref-rows", type=int, metavar="N",
                    help="a fixed N of rows per scenario instead of sizing by time (reproducible N)")  # fmt: skip
    group.addoption("--specref-tv", type=float, metavar="T",
                    help="size every scenario so that each check detects TV T at power 0.999 from the scenarios' "
                    "probabilities alone (the same N on every machine; no time cap without a budget)")  # fmt: skip
    group.addoption("--specref-scenarios", metavar="A,B", help="run only these scenarios (comma-separated)")
    group.addoption("--specref-report", metavar="DIR",
                    help="the run's report folder (default specref-reports/<impl>/, as `specref conform`)")  # fmt: skip


def pyproject_settings(rootpath: Path) -> dict:
    """[tool.specref] of rootpath/pyproject.toml as Settings fields; unknown keys are a usage error."""
    path = Path(rootpath) / "pyproject.toml"
    if not path.is_file():
        return {}
    text = path.read_text()
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib
        except ImportError:
            if "[tool.specref]" in text:
                why = "needs Python >= 3.11 or the tomli package; or give the settings as --specref-* options"
                raise pytest.UsageError(f"specref: reading [tool.specref] in {path} {why}") from None
            return {}
    table = tomllib.loads(text).get("tool", {}).get("specref", {})
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise pytest.UsageError(f"specref: [tool.specref] in {path} has unknown keys {unknown}; known: {list(KEYS)}")
    return {KEYS[key]: value for key, value in table.items()}


def settings_of(config: pytest.Config) -> Settings:
    """pyproject first, then the options on top."""
    fields = pyproject_settings(config.rootpath)
    for name in KEYS.values():
        value = config.getoption(f"--specref-{name.replace('_', '-')}")
        if value is not None:
            fields[name] = value
    try:
        return Settings(**fields).validate()
    except TypeError as error:
        raise pytest.UsageError(f"specref: bad settings {fields}: {error}") from None


def resolve_impl(spec: str, scenarios: list | str | None):
    """(adapter, label, scenario list) as `specref conform` resolves them; a bad IMPL is a pytest usage error."""
    from .conformance.resolve import resolve, select_scenarios

    try:
        adapter, label = resolve(spec)
        return adapter, label, select_scenarios(adapter, scenarios)
    except UsageError as error:
        raise pytest.UsageError(f"specref: {error}") from None


def conformance_run(settings: Settings, verify=None, **overrides):
    """specref.conformance.run with `settings` as defaults; verify is an IMPL string or a verify function/adapter."""
    from .conformance import run

    settings = dataclasses.replace(settings, **overrides).validate() if overrides else settings
    verify = settings.impl if verify is None else verify
    if verify is None:
        raise ValueError("verify=None and no impl in the settings: pass a verify function, an adapter or an IMPL")
    if isinstance(verify, str):
        verify, _, scenarios = resolve_impl(verify, settings.scenarios)
    else:
        scenarios = settings.scenarios  # a list, validated: run() checks the names against the contract
    extra = {key: value for key, value in (("rows", settings.rows), ("tv", settings.tv)) if value is not None}
    return run(verify, seed=settings.seed, budget_seconds=settings.budget_seconds, alpha=settings.alpha,
               scenarios=scenarios, **extra)  # fmt: skip


def _budget_words(settings: Settings) -> str:
    if settings.budget_seconds is None:
        if settings.tv is not None:
            return f"sized to detect TV {settings.tv:g}, no time cap"
        return "no time cap: fixed rows" if settings.rows is not None else "budget 300 s"
    return f"budget {settings.budget_seconds:g} s"


@pytest.fixture
def specref_conformance(pytestconfig: pytest.Config):
    """run(verify=None, **overrides) -> Report, with the session's specref settings as defaults."""
    settings = settings_of(pytestconfig)

    def run(verify=None, **overrides):
        return conformance_run(settings, verify, **overrides)

    return run


# --- the run as items ----------------------------------------------------------------------------------------------


class SpecrefCheckFailed(SpecrefError):
    """A conformance check failed (a pytest item's failure); the message is the full failure text."""


class ConformanceRun(pytest.Collector):
    """One conformance run; its items are its checks. The run itself happens in pytest_collection_modifyitems."""

    def collect(self):
        return []


class CheckItem(pytest.Item):
    def __init__(self, *, check, record: dict | None = None, error: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.check, self.record, self.error = check, record, error

    def runtest(self) -> None:
        if self.error is not None:
            raise SpecrefCheckFailed(self.error)
        record = self.record_of_check()
        if record["status"] == "not tested":
            pytest.skip(f"not tested: {record['reason']}")
        if record["status"] == "uninformative":  # rules out too little to count as a pass
            from .conformance.engine.check_words import uninformative_words

            pytest.skip(uninformative_words(record))
        if record["status"] != "passed":  # failed, or not run (a failure with its reason)
            raise SpecrefCheckFailed(failure_text(self.check, self.record))

    def record_of_check(self) -> dict:
        """This check's record in report.json (report.check_record): the one every output renders."""
        return next(c for c in self.record["checks"] if c["name"] == self.check.name)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, SpecrefCheckFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, self.name


def failure_text(check, record: dict) -> str:
    """The check, its p-value, alpha and detectable TV, then the report's failure section (with its reproduce
    snippet, rendered as report.md renders it)."""
    from .conformance.report.render import failure_section

    details = check.details
    as_dict = next(c for c in record["checks"] if c["name"] == check.name)
    if as_dict["status"] == "not run":
        head = f"{check.name} not run ({details.get('family', '')} check): {as_dict['reason']}; a failure"
    elif details.get("tier") == "T2":
        tv = "n/a" if math.isnan(check.guaranteed_tv) else f"{check.guaranteed_tv:.4g}"
        head = (f"{check.name} failed ({details.get('family', '')} check): p-value {check.p_value:.3g} <= alpha "
                f"{check.alpha:.3g}; detectable TV {tv} (power 0.999 at N = {check.n:,})")  # fmt: skip
    else:
        rows = f" in {check.n:,} rows" if check.n else ""
        count = f"{int(check.statistic)} violations{rows}" if not math.isnan(check.statistic) else "n/a"
        if details.get("error"):
            count = f"the adapter failed: {details['error']}"
        head = (f"{check.name} failed ({details.get('family', '')} check, T0): p-value 0, a certain failure "
                f"({count}); detectable TV: any (one violation suffices)")  # fmt: skip
    return "\n".join([head, f"verdict of the run: {record['verdict']}", *failure_section(as_dict, record)]).rstrip()


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    settings = settings_of(config)
    if settings.impl is None:
        return
    adapter, label, _ = resolve_impl(settings.impl, settings.scenarios)
    run_node = ConformanceRun.from_parent(session, name=f"specref[{label}]", nodeid=f"specref[{label}]")
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(
            f"specref: running the conformance suite on {settings.impl} ({_budget_words(settings)}, "
            f"alpha {settings.alpha:g}, seed {settings.seed})"
        )
    try:
        report = conformance_run(settings, adapter)  # scenarios validated by resolve_impl
    except Exception:  # noqa: BLE001 -- the adapter's failures are verdicts inside run(); this is specref's bug
        error = "internal error of specref (a bug in specref, not a verdict on the implementation):\n"
        items.append(CheckItem.from_parent(run_node, name="run", check=None, error=error + traceback.format_exc()))
        return
    record = report.to_dict()
    from .conformance.resolve import absolute_spec

    record["spec"] = absolute_spec(settings.impl)
    config.stash[_REPORT] = report
    config.stash[_FOLDER] = write_folder(report, settings, label)
    items.extend(CheckItem.from_parent(run_node, name=check.name, check=check, record=record)
                 for check in report.checks)  # fmt: skip


_REPORT = pytest.StashKey()
_FOLDER = pytest.StashKey()


def write_folder(report, settings: Settings, label: str) -> str:
    """The run's report folder, as `specref conform` writes it (report.md, report.json, the plots where matplotlib
    is installed); returns report.md's path."""
    from .conformance.report.render import write_report
    from .conformance.resolve import absolute_spec
    from .extras import MATPLOTLIB
    from .folders import writing
    from .outputs import default_folder

    folder = settings.report or default_folder(label)
    Path(folder).mkdir(parents=True, exist_ok=True)
    with writing(folder, "--specref-report"):
        paths = write_report(report, folder, spec=absolute_spec(settings.impl), plots=MATPLOTLIB.available)
    return str(paths["md"])


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    report = config.stash.get(_REPORT, None)
    if report is not None:
        terminalreporter.section("specref conformance")
        for line in report.summary().splitlines():
            terminalreporter.write_line(line)
        terminalreporter.write_line(f"  report: {config.stash[_FOLDER]}")
