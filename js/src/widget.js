// The anywidget front end shared by every xprof widget (Python side:
// xprof_widgets/widgets/_bokeh.py). It holds no BokehJS: BokehJS comes once
// per page from the kernel over the comm (bokeh_loader.js). The design, the
// synced traits and the messages: docs/frontend.md. Its CSS is widget.css,
// served through the widget's `_css` trait.
import { WidgetView } from "./view.js";

export default {
  render({ model, el }) {
    const view = new WidgetView(model, el);
    view.start();
    return () => view.destroy();
  },
};
