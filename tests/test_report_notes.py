"""A long failure detail repeated under many checks is said once, as a numbered note."""

from __future__ import annotations

from evalrunner.model import CaseReport, GradeResult, SuiteReport
from evalrunner.report import render_table

LONG = "no evidence of the arguments the tool received: " + "x" * 120


def case(name: str, detail: str) -> CaseReport:
    return CaseReport(name, f"{name}.yaml", None, (GradeResult("check(1)", False, detail),))


def test_a_repeated_long_detail_becomes_one_note_with_its_count() -> None:
    report = SuiteReport("s", "replay", (case("a", LONG), case("b", LONG), case("c", "short")))
    text = render_table(report)
    assert text.count(LONG) == 1
    assert text.count("✗ check(1): see note 1") == 2
    assert f"note 1 (2 checks): {LONG}" in text
    assert "✗ check(1): short" in text


def test_a_long_detail_said_once_stays_in_place() -> None:
    text = render_table(SuiteReport("s", "replay", (case("a", LONG),)))
    assert f"✗ check(1): {LONG}" in text and "note 1" not in text
