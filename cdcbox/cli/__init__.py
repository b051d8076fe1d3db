"""`cdc-ctl`, a thin click shell over the library: parse, call one function, print."""
