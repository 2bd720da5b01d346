"""Commands around the run: record, convert, new, schema export, merge, list."""
