"""Write xprof_widgets/widgets/chart_templates.json: each chart template's json_item, made
once by Bokeh with a marker for each parameter, and where each marker is (see
`xprof_widgets/widgets/_templates.py`). Run it after changing a templated chart's figure
or the pinned Bokeh: `python tools/make_chart_templates.py`
(`tests/test_chart_templates.py` says when the file is out of date)."""

import json

from xprof_widgets.widgets import _templates


def main():
    made = _templates.made_file()
    _templates.TEMPLATE_FILE.write_text(json.dumps(made) + "\n", encoding="utf-8")
    print(f"wrote {_templates.TEMPLATE_FILE}: {len(made['templates'])} templates for Bokeh {made['bokeh']}")


if __name__ == "__main__":
    main()
