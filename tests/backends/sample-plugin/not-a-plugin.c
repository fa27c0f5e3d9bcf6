/* not-a-plugin.c - a shared object without the plugin entry point, for the
 * test that such a file is refused with a clear message. */
int not_a_plugin_answer(void);
int not_a_plugin_answer(void) { return 42; }
