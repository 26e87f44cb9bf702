"""Runs the one job of a GitHub Actions workflow in a Debian chroot, as a container job would.

    python3 gha.py WORKFLOW --root TIER --self SRC --repo OWNER/NAME=SRC ... --out DIR [--env K=V ...]

For trying dlconform's recipes (.ci/library) on a machine without GitHub: TIER is a Debian
root file system (`make tier TIER=bookworm`), used read-only under an overlay that is thrown
away, so every run starts from the same fresh system. Steps run in order as root, in
/__w/ws, with the job's `env` (then --env), through `bash -e -c`:
- `run:` as written;
- `uses: actions/checkout@v4`: `git clone` inside the chroot (so a checkout needs git there,
  as the real action does to make a clone) of --self, or of the --repo given for `repository`,
  into `path`;
- `uses: actions/upload-artifact@v4`: `path` copied to DIR/artifacts/NAME.
A step with `if:` runs when its condition holds (`!cancelled()`, `steps.ID.outcome ==
'success'`, joined by &&), any other after all before it succeeded. DIR/steps.json lists each
step's outcome; the exit status is 0 when the job succeeded, else 1 (2: usage). Root only:
the overlay and the chroot's mounts live in a mount namespace of their own (unshare), so
nothing stays mounted. The workflow is read as the YAML subset dlconform's recipes use.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

CHROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
WS = "/__w/ws"


def _value(text):
    text = re.sub(r"\s+#.*$", "", text).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def _flow_mapping(text):
    """{a: b, c: d} -> dict (no nesting, no commas inside values)."""
    inner = text.strip()[1:-1]
    out = {}
    for part in filter(None, (p.strip() for p in inner.split(","))):
        k, v = part.split(":", 1)
        out[k.strip()] = _value(v)
    return out


def _block(lines, i, indent):
    """The mapping of lines[i:] indented more than `indent`: (dict, next index)."""
    out = {}
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            i += 1
            continue
        ind = len(line) - len(line.lstrip())
        if ind <= indent:
            break
        key, _, rest = line.strip().partition(":")
        rest = rest.strip()
        if rest in ("|", "|-"):  # a literal block: the lines indented deeper, dedented
            text = []
            i += 1
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > ind):
                text.append(lines[i])
                i += 1
            deep = min((len(t) - len(t.lstrip()) for t in text if t.strip()), default=0)
            out[key] = "\n".join(t[deep:] for t in text).strip("\n") + "\n"
        elif rest.startswith("{"):
            out[key] = _flow_mapping(re.sub(r"\s+#.*$", "", rest))
            i += 1
        elif rest == "" or rest.startswith("#"):
            out[key], i = _block(lines, i + 1, ind)
        else:
            out[key] = _value(rest)
            i += 1
    return out, i


def jobs(text):
    """{job name: (its env, its steps)} of a workflow: dicts, and lists of step dicts."""
    lines = text.splitlines()
    out, name, in_jobs = {}, None, False
    for i, line in enumerate(lines):
        if re.match(r"^\S", line):
            in_jobs = line.startswith("jobs:")
        m = re.match(r"^  ([\w-]+):\s*(#.*)?$", line) if in_jobs else None
        if m:
            name = m.group(1)
            out[name] = ({}, [])
        if name is None:
            continue
        if re.match(r"^    env:\s*(#.*)?$", line):
            out[name] = (_block(lines, i + 1, 4)[0], out[name][1])
        if re.match(r"^    steps:\s*$", line):
            body = []
            for l in lines[i + 1:]:
                if l.strip() and not l.startswith("      "):
                    break
                body.append(l)
            chunks = []
            for l in body:
                if l.startswith("      - "):
                    chunks.append(["        " + l[8:]])
                elif chunks:
                    chunks[-1].append(l)
            out[name] = (out[name][0], [_block(c, 0, 6)[0] for c in chunks])
    return out


def condition(expr, outcomes):
    """A step's `if:`: True, False, or ValueError for a form this runner does not know."""
    expr = expr.strip()
    if expr.startswith("${{") and expr.endswith("}}"):
        expr = expr[3:-2]
    result = True
    for term in (t.strip() for t in expr.split("&&")):
        m = re.fullmatch(r"steps\.(\w+)\.outcome == '(\w+)'", term)
        if term == "!cancelled()":
            continue
        if not m:
            raise ValueError("unknown condition %r" % term)
        result = result and outcomes.get(m.group(1)) == m.group(2)
    return result


class Job:
    def __init__(self, a, merged):
        self.a, self.root = a, merged
        self.outcomes, self.log = {}, []
        found = jobs(open(a.workflow, encoding="utf-8").read())
        if len(found) != 1:
            raise SystemExit("gha: %s has %d jobs; this runner runs a workflow of one" % (a.workflow, len(found)))
        env, self.steps = next(iter(found.values()))
        env.update(kv.split("=", 1) for kv in a.env)
        self.env = dict(env, PATH=CHROOT_PATH, HOME="/root", LANG="C.UTF-8", CI="true",
                        GITHUB_ACTIONS="true", GITHUB_WORKSPACE=WS)

    def sh(self, script):
        cmd = ["chroot", self.root, "/usr/bin/env", "-i"] + ["%s=%s" % kv for kv in sorted(self.env.items())]
        cmd += ["/bin/bash", "-e", "-c", "cd %s && %s" % (WS, script)]
        return subprocess.run(cmd).returncode

    def checkout(self, w):
        repo = w.get("repository")
        src = "self" if repo is None else repo.replace("/", "+")
        if repo is not None and repo not in dict(r.split("=", 1) for r in self.a.repo):
            print("gha: no --repo for %s" % repo)
            return 1
        dest = w.get("path", ".")
        return self.sh("git config --global --add safe.directory '*' && git clone -q /mnt/src/%s %s" % (src, dest))

    def upload(self, w):
        dest = os.path.join(self.a.out, "artifacts", w["name"])
        src = os.path.join(self.root, WS.lstrip("/"), w["path"])
        shutil.rmtree(dest, ignore_errors=True)
        if not os.path.exists(src):
            print("gha: nothing at %s" % w["path"])
            return 1
        shutil.copytree(src, dest, symlinks=True)
        return 0

    def run(self):
        ok = True
        for n, step in enumerate(self.steps, 1):
            label = step.get("name") or step.get("uses") or step.get("run", "")[:60]
            cond = condition(step["if"], self.outcomes) if "if" in step else ok
            if not cond:
                outcome = "skipped"
            else:
                print("gha: step %d: %s" % (n, label), flush=True)
                uses = step.get("uses", "")
                if uses.startswith("actions/checkout@"):
                    rc = self.checkout(step.get("with", {}))
                elif uses.startswith("actions/upload-artifact@"):
                    rc = self.upload(step["with"])
                elif "run" in step:
                    rc = self.sh(step["run"])
                else:
                    print("gha: cannot run %r" % uses)
                    rc = 2
                outcome = "success" if rc == 0 else "failure"
                ok = ok and rc == 0
            if "id" in step:
                self.outcomes[step["id"]] = outcome
            self.log.append({"step": n, "name": label, "outcome": outcome})
            print("gha: step %d: %s: %s" % (n, label, outcome), flush=True)
        with open(os.path.join(self.a.out, "steps.json"), "w", encoding="utf-8") as f:
            json.dump(self.log, f, indent=1)
        return 0 if ok else 1


def mount(*args):
    subprocess.run(["mount"] + list(args), check=True)


def inside(a):
    """In a mount namespace of our own: the overlay, the API file systems, the sources."""
    scratch = os.path.abspath(os.path.join(a.out, "overlay"))
    shutil.rmtree(scratch, ignore_errors=True)  # mounts of earlier runs died with their namespace
    upper, work, merged = (os.path.join(scratch, d) for d in ("upper", "work", "merged"))
    for d in (upper, work, merged):
        os.makedirs(d)
    mount("--make-rprivate", "/")
    mount("-t", "overlay", "overlay", "-o", "lowerdir=%s,upperdir=%s,workdir=%s" % (a.root, upper, work), merged)
    mount("-t", "proc", "proc", os.path.join(merged, "proc"))
    mount("--rbind", "/dev", os.path.join(merged, "dev"))
    mount("--rbind", "/sys", os.path.join(merged, "sys"))
    shutil.copyfile("/etc/resolv.conf", os.path.join(merged, "etc", "resolv.conf"))
    if a.apt_cache:  # downloaded .debs kept between runs; the system itself stays fresh
        os.makedirs(a.apt_cache, exist_ok=True)
        mount("--bind", a.apt_cache, os.path.join(merged, "var", "cache", "apt", "archives"))
    sources = [("self", a.self)] + [(r.split("=", 1)[0].replace("/", "+"), r.split("=", 1)[1]) for r in a.repo]
    for name, path in sources:
        dest = os.path.join(merged, "mnt", "src", name)
        os.makedirs(dest, exist_ok=True)
        mount("--bind", "-o", "ro", os.path.abspath(path), dest)
    os.makedirs(os.path.join(merged, WS.lstrip("/")), exist_ok=True)
    try:
        return Job(a, merged).run()
    finally:
        # never a tree walk under merged: /dev and /sys are bound there
        subprocess.run(["umount", "-R", merged], stderr=subprocess.DEVNULL)
        if not a.keep:
            for d in (upper, work):
                shutil.rmtree(d, ignore_errors=True)
            for d in (merged, scratch):
                try:
                    os.rmdir(d)
                except OSError:
                    pass


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workflow")
    ap.add_argument("--root", required=True, help="a Debian root file system (read-only lower layer)")
    ap.add_argument("--self", required=True, help="the repository the workflow belongs to (a git repository)")
    ap.add_argument("--repo", action="append", default=[], help="OWNER/NAME=PATH for `repository:` checkouts")
    ap.add_argument("--env", action="append", default=[], help="K=V over the workflow's env")
    ap.add_argument("--out", required=True, help="steps.json and artifacts/ go here")
    ap.add_argument("--apt-cache", default=None, help="a folder for apt's downloads, kept between runs")
    ap.add_argument("--keep", action="store_true", help="keep what the job wrote (OUT/overlay/upper)")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("gha: needs root (overlay, chroot)", file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    if a.inside:
        return inside(a)
    return subprocess.run(["unshare", "--mount", "--fork", sys.executable, os.path.abspath(__file__), "--inside"]
                          + argv).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
