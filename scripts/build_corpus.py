"""Build corpus.jsonl: docstrings of a fixed list of standard-library modules (PSF licence).

One JSON object per line, ``{"text": ...}``: each docstring, headed by its qualified name, is a
document. The texts joined as they are give the prose the byte tokenizer reads.
"""

import importlib
import inspect
import json
import sys

MODULES = [
    "abc",
    "argparse",
    "array",
    "ast",
    "base64",
    "bisect",
    "calendar",
    "cmd",
    "codecs",
    "collections",
    "configparser",
    "contextlib",
    "copy",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "difflib",
    "doctest",
    "email.message",
    "enum",
    "filecmp",
    "fnmatch",
    "fractions",
    "functools",
    "getopt",
    "gettext",
    "glob",
    "gzip",
    "hashlib",
    "heapq",
    "hmac",
    "html.parser",
    "http.client",
    "http.cookiejar",
    "inspect",
    "io",
    "ipaddress",
    "itertools",
    "json",
    "locale",
    "logging",
    "logging.handlers",
    "math",
    "mimetypes",
    "numbers",
    "operator",
    "optparse",
    "os",
    "os.path",
    "pathlib",
    "pdb",
    "pickle",
    "pkgutil",
    "platform",
    "pprint",
    "profile",
    "queue",
    "quopri",
    "random",
    "re",
    "reprlib",
    "sched",
    "secrets",
    "selectors",
    "shlex",
    "shutil",
    "signal",
    "socket",
    "socketserver",
    "sqlite3",
    "ssl",
    "statistics",
    "string",
    "struct",
    "subprocess",
    "tarfile",
    "tempfile",
    "textwrap",
    "threading",
    "timeit",
    "tokenize",
    "tomllib",
    "trace",
    "traceback",
    "types",
    "typing",
    "unittest",
    "urllib.parse",
    "urllib.request",
    "uuid",
    "warnings",
    "wave",
    "weakref",
    "webbrowser",
    "xml.dom.minidom",
    "zipfile",
    "zoneinfo",
]


def public_members(obj):
    for name in sorted(vars(obj)):
        if not name.startswith("_"):
            yield name, vars(obj)[name]


def docs(module_name):
    module = importlib.import_module(module_name)
    seen = set()
    if doc := inspect.getdoc(module):
        yield module_name, doc
    for name, member in public_members(module):
        if getattr(member, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(member):
            items = [(f"{module_name}.{name}", member)]
            items += [
                (f"{module_name}.{name}.{m}", v)
                for m, v in public_members(member)
                if inspect.isroutine(v) or isinstance(v, (classmethod, staticmethod, property))
            ]
        elif inspect.isfunction(member):
            items = [(f"{module_name}.{name}", member)]
        else:
            continue
        for qualname, obj in items:
            doc = inspect.getdoc(obj)
            if doc and doc not in seen and len(doc) > 80:
                seen.add(doc)
                yield qualname, doc


def main(path):
    parts = []
    for module_name in MODULES:
        for qualname, doc in docs(module_name):
            parts.append(f"{qualname}\n\n{doc.strip()}\n")
    texts = [part + "\n" for part in parts[:-1]] + parts[-1:]  # a blank line between documents
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for text in texts:
            f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
    print(sum(len(t.encode()) for t in texts), "bytes of text in", len(texts), "documents")


if __name__ == "__main__":
    main(sys.argv[1])
