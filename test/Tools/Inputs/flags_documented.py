#!/usr/bin/env python3
"""Fails, naming them, on the flags a tool's parser accepts that its --help
does not mention. The parser's flags are the string literals it compares
`arg` with (`arg == "--flag"`); --help may write a pair as --[no-]flag.

  flags_documented.py PARSER_SOURCE HELP_TEXT_FILE
"""
import re
import sys

source = open(sys.argv[1]).read()
help_text = open(sys.argv[2]).read()
accepted = set(re.findall(r'arg == "(--[a-z0-9-]+)"', source))
if not accepted:
    sys.exit(f"{sys.argv[1]}: no flags found (the parser's form changed?)")
documented = set(re.findall(r'(?<![\w-])(--[a-z0-9][a-z0-9-]*)', help_text))
for stem in re.findall(r'--\[no-\]([a-z0-9-]+)', help_text):
    documented.update({"--" + stem, "--no-" + stem})
missing = sorted(accepted - documented)
if missing:
    sys.exit("not in --help: " + " ".join(missing))
print(f"{len(accepted)} flags, all in --help")
