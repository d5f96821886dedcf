"""Pure numbers, no I/O: intervals, exact tests, stratified comparison, sequential tests."""
