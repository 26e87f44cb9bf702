"""Bug reports that stand alone (issue 13, item 5): `dlconform report`.

- kit.py: the pure-Python stand-in for dlconform that a standalone reproducer inlines;
- standalone.py: a record's reproducer snippet turned into a script that needs only the library,
  Python and ctypes;
- markdown.py: one Markdown file per finding of a results.json.
"""
