#!/usr/bin/env python3
"""Builds the attack and benign corpora of rulesets/crs from the Core Rule Set's own
regression tests (CRS 3.3.4, Debian's source package; Apache-2.0).

Each test stage becomes one request: method, target and headers as the test sends
them. Attacks are the stages that expect a paranoia-level-1 rule of a compiled family
to fire (`log_contains: id "N"`); benign ones are those that expect it not to
(`no_log_contains`). The gateway's rules see the request line and the headers, not
the body: a stage whose body is a form (`application/x-www-form-urlencoded`, or no
type) sends the same arguments in the query instead (`"moved": true`), percent-
encoding only what a request target cannot carry, so ModSecurity's `ARGS` are the
same; a stage with any other body is left out. The output is committed, so this
runs only to rebuild it:

    scripts/crs-corpus.py            # downloads and checks the source, writes the files
"""
import hashlib
import io
import json
import pathlib
import re
import sys
import tarfile
import urllib.parse
import urllib.request

import yaml  # PyYAML

SOURCE = "http://deb.debian.org/debian/pool/main/m/modsecurity-crs/modsecurity-crs_3.3.4.orig.tar.gz"
SHA256 = "15a84aaa041aa532905a34546b613bd3aed122e3f9814fbb5c28e1655d02b74d"
FAMILIES = {"913", "921", "930", "931", "932", "933", "934", "941", "942", "943", "944"}
ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "rulesets" / "crs" / "corpus"


def paranoia_one_rules(tar):
    """The ids of the rules at paranoia level 1, read from the rule files' sections."""
    ids = set()
    for member in tar.getmembers():
        if not re.search(r"/rules/REQUEST-9\d\d-.*\.conf$", member.name):
            continue
        text = tar.extractfile(member).read().decode().replace("\\\n", " ")
        level = 1
        for line in text.splitlines():
            m = re.match(r'\s*SecRule TX:EXECUTING_PARANOIA_LEVEL "@lt (\d)"', line)
            if m:
                level = int(m.group(1))
                continue
            m = re.search(r'"id:(\d+)', line)
            if m and line.lstrip().startswith("SecRule"):
                tag = re.search(r"paranoia-level/(\d)", line)
                if (int(tag.group(1)) if tag else level) == 1:
                    ids.add(m.group(1))
    return ids


# What a request target may carry as it is; every other byte is percent-encoded.
TARGET_SAFE = "!$&'()*+,-./:;=?@_~%[]{}|^`\\"


def as_target(uri, form):
    """`uri` with the form's arguments appended to its query."""
    moved = urllib.parse.quote(form.encode("latin-1", "replace") if all(ord(c) < 256 for c in form) else form.encode(), safe=TARGET_SAFE)
    return uri + ("&" if "?" in uri else "?") + moved


def requests(tar, pl1):
    for member in sorted(tar.getmembers(), key=lambda m: m.name):
        if "/tests/regression/tests/" not in member.name or not member.name.endswith(".yaml"):
            continue
        doc = yaml.safe_load(tar.extractfile(member).read())
        for test in doc.get("tests", []):
            for number, stage in enumerate(test.get("stages", [])):
                stage = stage.get("stage", {})
                given, expected = stage.get("input", {}), stage.get("output", {})
                if given.get("raw_request") or given.get("encoded_request"):
                    continue
                headers = [[str(k).lower(), str(v)] for k, v in (given.get("headers") or {}).items()]
                target = str(given.get("uri", "/"))
                form = given.get("data")
                if isinstance(form, list):
                    form = "".join(form)
                moved = bool(form)
                if moved:
                    kind = next((v for k, v in headers if k == "content-type"), "application/x-www-form-urlencoded")
                    if not kind.lower().startswith("application/x-www-form-urlencoded"):
                        continue
                    target = as_target(target, str(form))
                    headers = [[k, v] for k, v in headers if k not in ("content-type", "content-length")]
                for key, label in (("log_contains", "attack"), ("no_log_contains", "benign")):
                    m = re.search(r'id "(\d+)"', str(expected.get(key, "")))
                    if not m or m.group(1)[:3] not in FAMILIES or m.group(1) not in pl1:
                        continue
                    if not any(k == "host" for k, _ in headers):
                        headers.insert(0, ["host", "localhost"])
                    yield label, {
                        "test": f'{test["test_title"]}' + (f"/{number + 1}" if number else ""),
                        "rule": int(m.group(1)),
                        "method": str(given.get("method", "GET")).upper(),
                        "target": target,
                        "headers": headers,
                        **({"moved": True} if moved else {}),
                    }


def main():
    data = urllib.request.urlopen(SOURCE, timeout=60).read()
    if hashlib.sha256(data).hexdigest() != SHA256:
        sys.exit(f"{SOURCE}: unexpected SHA-256")
    tar = tarfile.open(fileobj=io.BytesIO(data))
    pl1 = paranoia_one_rules(tar)
    out = {"attack": [], "benign": []}
    for label, request in requests(tar, pl1):
        out[label].append(request)
    OUT.mkdir(parents=True, exist_ok=True)
    for label, name in (("attack", "attacks.jsonl"), ("benign", "crs-benign.jsonl")):
        with open(OUT / name, "w") as f:
            for request in out[label]:
                f.write(json.dumps(request, ensure_ascii=False) + "\n")
        print(f"{name}: {len(out[label])} requests")


if __name__ == "__main__":
    main()
