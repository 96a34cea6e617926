#!/usr/bin/env python3
"""Solves botgate's proof-of-work challenge once, as a browser would, and prints the
pass cookie for the load benchmark's requests as `botgate_pass=…`: the name a pass has over
HTTPS, which the gateway reads on plain HTTP too (its own name there,
`botgate_pass_plain`, is newer), so the requests are the same for every build.

    pass.py PORT HOST
"""
import hashlib
import re
import sys
import urllib.error
import urllib.parse
import urllib.request

port, host = sys.argv[1], sys.argv[2]
base = f"http://127.0.0.1:{port}"


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


opener = urllib.request.build_opener(NoRedirect)
# A client the components challenge.
request = urllib.request.Request(f"{base}/", headers={"Host": host, "User-Agent": "python-requests/2.32"})
try:
    page = opener.open(request).read().decode()
except urllib.error.HTTPError as answer:
    page = answer.read().decode()
match = re.search(r'name="token" value="([^"]+)"', page)
if not match:
    sys.exit(f"no challenge from {host}:\n{page[:500]}")
token = match.group(1)
bits = int(token.split(".")[2])
counter = 0
while True:
    digest = hashlib.sha256(f"{token}:{counter}".encode()).digest()
    if int.from_bytes(digest, "big") >> (256 - bits) == 0:
        break
    counter += 1
form = urllib.parse.urlencode({"token": token, "counter": counter, "return": "/"}).encode()
post = urllib.request.Request(f"{base}/.botgate/challenge", data=form, headers={
    "Host": host, "Content-Type": "application/x-www-form-urlencoded"})
try:
    answer = opener.open(post)
except urllib.error.HTTPError as redirect:
    answer = redirect
cookie = answer.headers.get("Set-Cookie", "")
if not re.match(r"botgate_pass(_plain)?=", cookie):
    sys.exit(f"the challenge was not accepted ({answer.status})")
print("botgate_pass=" + cookie.split(";")[0].split("=", 1)[1])
