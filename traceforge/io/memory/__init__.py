"""Memory while reading and writing: handing pages back, paged temporary arrays, temporary
files and helper threads."""
