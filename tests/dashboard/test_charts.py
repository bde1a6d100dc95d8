"""The SVG chart functions: well-formed XML, escaped labels, a <title> per bar and point, axes,
and an empty state."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from apps.dashboard import charts
from apps.dashboard.charts import Series

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def bars(root: ET.Element) -> list[ET.Element]:
    return root.findall(f".//{SVG}rect[@class='bar']")


def test_stacked_bars_draw_one_rect_per_nonzero_value_with_a_title_each():
    root = parse(
        charts.stacked_bars(
            chart_id="c",
            title="Tasks per day",
            categories=["11-21", "11-22", "11-23"],
            series=[Series("completed", [2, 0, 1], "#0a0"), Series("failed", [1, 0, 3], "#a00")],
            y_label="tasks",
            x_label="Day",
        )
    )
    drawn = bars(root)
    assert [(b.get("data-category"), b.get("data-series"), b.get("data-value")) for b in drawn] == [
        ("11-21", "completed", "2"),
        ("11-21", "failed", "1"),
        ("11-23", "completed", "1"),
        ("11-23", "failed", "3"),
    ]
    assert drawn[3].find(f"{SVG}title").text == "11-23 · failed: 3"
    assert root.get("role") == "img"
    assert root.find(f"{SVG}title").text == "Tasks per day"
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "Day" in texts and "tasks" in texts  # axis labels
    assert "11-21" in texts and "completed" in texts and "failed" in texts  # x labels, legend


def test_stacked_segments_sit_on_each_other_and_the_tallest_bar_fits_the_axis():
    root = parse(
        charts.stacked_bars(
            chart_id="c",
            title="t",
            categories=["a"],
            series=[Series("x", [3], "#000"), Series("y", [5], "#111")],
            y_label="n",
            x_label="k",
        )
    )
    lower, upper = bars(root)
    lower_top = float(lower.get("y"))
    assert abs(float(upper.get("y")) + float(upper.get("height")) - lower_top) < 0.2
    assert float(upper.get("y")) >= charts.TOP - 0.1
    assert float(lower.get("y")) + float(lower.get("height")) <= charts.HEIGHT - charts.BOTTOM + 0.1
    assert float(upper.get("height")) / float(lower.get("height")) == pytest.approx(5 / 3, rel=0.02)


def test_labels_that_look_like_markup_are_escaped_not_injected():
    goal = '<script>alert("x")</script> & "quotes"'
    svg = charts.stacked_bars(
        chart_id='c" onload="alert(1)',
        title="Tokens <b>per</b> task",
        categories=["#1"],
        series=[Series('<img src=x onerror="y">', [10], '#000" onclick="z')],
        y_label="tokens",
        x_label="Task",
        hover=[goal],
    )
    root = parse(svg)  # still well-formed XML
    assert "<script" not in svg and "<img" not in svg and "<b>" not in svg
    assert not root.findall(f".//{SVG}script")
    assert all("onclick" not in el.attrib and "onload" not in el.attrib for el in root.iter())
    (bar,) = bars(root)
    assert bar.find(f"{SVG}title").text == f'#1 — {goal} · <img src=x onerror="y">: 10'
    assert bar.get("fill") == '#000" onclick="z'  # an attribute value, not a new attribute
    assert root.get("id") == 'c" onload="alert(1)'


def test_chart_without_data_says_no_tasks_yet():
    for svg in (
        charts.stacked_bars(
            chart_id="c", title="t", categories=[], series=[], y_label="n", x_label="k"
        ),
        charts.stacked_bars(
            chart_id="c",
            title="t",
            categories=["a", "b"],
            series=[Series("x", [0, 0], "#000")],
            y_label="n",
            x_label="k",
        ),
        charts.line_chart(
            chart_id="c",
            title="t",
            categories=["a"],
            series=[Series("x", [None], "#000")],
            y_label="n",
            x_label="k",
        ),
    ):
        root = parse(svg)
        assert not bars(root) and not root.findall(f".//{SVG}circle")
        assert root.find(f"{SVG}text[@class='empty']").text == "No tasks yet."


def test_line_chart_draws_a_point_per_value_and_breaks_the_line_at_gaps():
    root = parse(
        charts.line_chart(
            chart_id="cache",
            title="Cache hit rate",
            categories=["d1", "d2", "d3", "d4", "d5"],
            series=[Series("hit rate", [0.5, 0.75, None, 0.25, 1.0], "#00f")],
            y_label="hit rate",
            x_label="Day",
            fmt=charts.percent,
            y_max=1.0,
        )
    )
    points = root.findall(f".//{SVG}circle[@class='point']")
    assert [p.find(f"{SVG}title").text for p in points] == [
        "d1 · hit rate: 50%",
        "d2 · hit rate: 75%",
        "d4 · hit rate: 25%",
        "d5 · hit rate: 100%",
    ]
    lines = root.findall(f".//{SVG}polyline")
    assert [len(line.get("points").split()) for line in lines] == [2, 2]
    ys = [float(p.get("cy")) for p in points]
    assert ys[3] == charts.TOP  # 100% is the top of the axis
    ticks = [t.text for t in root.findall(f".//{SVG}g[@class='y-axis']/{SVG}text")]
    assert ticks[0] == "0%" and ticks[-1] == "100%"


def test_many_categories_keep_at_most_a_dozen_x_labels():
    categories = [f"d{i}" for i in range(90)]
    root = parse(
        charts.stacked_bars(
            chart_id="c",
            title="t",
            categories=categories,
            series=[Series("x", [1] * 90, "#000")],
            y_label="n",
            x_label="k",
        )
    )
    labels = root.findall(f".//{SVG}g[@class='x-axis']/{SVG}text")
    assert 1 < len(labels) <= charts.MAX_X_LABELS
    assert labels[-1].text == "d89"  # the newest day is always labelled
    assert len(bars(root)) == 90


def test_axis_top_is_a_round_number_at_or_above_the_data():
    assert charts.nice_ceiling(7) == (8, 2)
    assert charts.nice_ceiling(1) == (1, 0.25)
    assert charts.nice_ceiling(2, whole=True) == (2, 1)  # counts: no "0.5 tasks" tick
    assert charts.nice_ceiling(1, whole=True) == (1, 1)
    assert charts.nice_ceiling(0.0123)[0] >= 0.0123
    top, step = charts.nice_ceiling(12_345)
    assert top >= 12_345 and top / step <= 5
