"""Python-code prompts of different lengths (the embedded pair was trained on Python source)."""

PROMPTS = [
    "def fibonacci(n):\n",
    "import os\nimport sys\n\n\ndef main(argv):\n    ",
    "class Stack:\n    \"\"\"A last-in, first-out stack.\"\"\"\n\n    def __init__(self):\n"
    "        self._items = []\n\n    def push(self, item):\n",
    "    for i in range(",
    "# Copyright\n\"\"\"Utilities for reading configuration files.\"\"\"\n\nimport re\n"
    "import json\nfrom collections import OrderedDict\n\n__all__ = [",
    "def _parse_header(line):\n    \"\"\"Parse a header line into a key and a value.\"\"\"\n"
    "    key, sep, value = line.partition(':')\n    if not sep:\n",
    "    return self.",
    "try:\n    import threading\nexcept ImportError:\n    threading = None\n\n\n"
    "class Timer:\n    def __init__(self, interval, function, args=None, kwargs=None):\n"
    "        self.interval = interval\n        self.function = function\n",
]
