"""CI runs what the README tells a newcomer to run, and the README's commands are the ones the
end-to-end test runs (tests/e2e/test_readme.py)."""

from tests.support.process import REPO
from tests.support.readme import commands, run_command, the_test_command


def test_ci_runs_exactly_the_readmes_test_command():
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert ci[-1].strip() == the_test_command()


def test_ci_builds_a_virtualenv_of_its_own_so_nothing_installed_by_hand_can_make_it_pass():
    ci = (REPO / ".ci" / "run").read_text()
    assert "-m venv" in ci and "mktemp -d" in ci and "bin/activate" in ci


def test_the_readme_runs_the_app_with_no_flags_and_installs_only_the_requirements():
    assert run_command() == "python -m pip install -r requirements.txt && python run.py"


def test_the_test_requirements_hold_what_the_tests_and_benchmark_import():
    requirements = (REPO / "requirements-test.txt").read_text()
    assert "-r requirements-bench.txt" in requirements  # matplotlib: the long run's plot is tested
    assert "matplotlib" in (REPO / "requirements-bench.txt").read_text()


def test_the_loader_example_is_two_commands():
    assert commands("Common flags")[-2:] == ["python run.py load --from samples/trading-day --available-now",
                                             "python run.py --no-producer"]
