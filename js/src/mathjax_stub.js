// Replaces BokehJS's bundled MathJax (1.8 MB). BokehJS's load_module() treats
// a MODULE_NOT_FOUND error as "not available": math text is disabled, plain
// text labels are unaffected.
const error = new Error("MathJax is not bundled in xprof_widgets");
error.code = "MODULE_NOT_FOUND";
throw error;
