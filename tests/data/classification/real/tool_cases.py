"""Real command-line failures for holdout-real.jsonl: redis-server (through redis-cli), the sqlite3
shell, git, curl, jq, make, npm, pip, kubectl, ssh and PostgreSQL (through psql), each run on this machine (servers
on loopback ports), with
the outcome an agent's shell tool would report: what the command wrote to stderr (stdout when stderr
is empty) as the message, and its exit code (none when it is 0: redis-cli exits 0 after an error
reply, which the agent then has alone). One JSON line per case, labelled beforehand.

Run: python3 tool_cases.py > tools.jsonl (needs redis-server and redis-cli, sqlite3, git, curl, jq,
make, npm, pip, kubectl, OpenSSH's ssh and ssh-keygen, paramiko from PyPI (the loopback SSH server),
and Debian's postgresql 15 (its server is started here as the postgres user); npm and pip ask their
registries about one package name that does not exist).
Random ports are written as 8787 (a server) and 8799 (a closed port), temporary directories as /work/repo.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RETRYABLE = {"timeout", "rate_limited", "network", "unavailable", "internal"}
WORK = tempfile.mkdtemp(prefix="real-tools-")
REPLACE = [(WORK, "/work/repo")]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def first_line(cmd):
    return subprocess.run(cmd, capture_output=True, text=True).stdout.strip().splitlines()[0]


def fixed(text):
    for old, new in REPLACE:
        text = text.replace(old, new)
    return text


def case(id, category, source, cmd, cwd=None, input=None, env=None):
    r = subprocess.run(cmd, cwd=cwd or WORK, capture_output=True, text=True, input=input, timeout=120,
                       env={**os.environ, **(env or {})}, shell=isinstance(cmd, str))
    report(id, category, source, r.stderr.strip() or r.stdout.strip(), r.returncode)


def report(id, category, source, text, returncode):
    """Prints the case of a command that wrote `text` and exited with `returncode`."""
    if returncode == 0 and not text.startswith(("(error)", "ERR", "WRONGTYPE", "NOAUTH", "OOM", "NOPERM", "AUTH failed")):
        print(f"{id}: did not fail: {text[:200]!r}", file=sys.stderr)
        return
    # redis-cli exits 0 on an error reply: the reply is all the agent has.
    outcome = {"message": fixed(text), "exit_code": returncode} if returncode else {"message": fixed(text)}
    line = {"id": id, "source": source, "category": category, "retryable": category in RETRYABLE,
            "tags": [] if returncode else ["message-only"], "outcome": outcome}
    print(json.dumps(line, ensure_ascii=False))


# ---------------------------------------------------------------- redis-server 7, through redis-cli
REDIS = first_line(["redis-server", "--version"]).split(" sha=")[0].replace("Redis server v=", "redis-server ")
port, locked_port, closed = free_port(), free_port(), free_port()
REPLACE += [(str(port), "8787"), (str(locked_port), "8787"), (str(closed), "8799")]
base = ["redis-server", "--save", "", "--appendonly", "no", "--bind", "127.0.0.1", "--daemonize", "no"]
servers = [
    subprocess.Popen(base + ["--port", str(port), "--maxmemory", "1mb", "--maxmemory-policy", "noeviction"],
                     stdout=subprocess.DEVNULL),
    subprocess.Popen(base + ["--port", str(locked_port), "--requirepass", "s3cret"], stdout=subprocess.DEVNULL),
]
time.sleep(0.5)
cli = ["redis-cli", "-h", "127.0.0.1", "-p", str(port)]
locked = ["redis-cli", "-h", "127.0.0.1", "-p", str(locked_port)]
subprocess.run(cli + ["CONFIG", "SET", "maxmemory", "0"], capture_output=True)
subprocess.run(cli + ["RPUSH", "queue", "job-1"], capture_output=True)
subprocess.run(cli + ["SET", "counter", "abc"], capture_output=True)
subprocess.run(cli + ["ACL", "SETUSER", "reader", "on", ">pw", "~*", "+get"], capture_output=True)
RC = f"{REDIS}, redis-cli"
case("r-redis-wrongtype", "validation", RC, cli + ["GET", "queue"])
case("r-redis-unknown-command", "validation", RC, cli + ["JSON.GET", "doc"])
case("r-redis-wrong-arity", "validation", RC, cli + ["GET"])
case("r-redis-not-integer", "validation", RC, cli + ["INCR", "counter"])
case("r-redis-noperm", "permission_denied", RC, cli + ["--user", "reader", "--pass", "pw", "--no-auth-warning", "SET", "k", "v"])
dump = subprocess.run(cli + ["--no-raw", "DUMP", "queue"], capture_output=True).stdout
case("r-redis-noauth", "auth", RC, locked + ["GET", "k"])
case("r-redis-wrongpass", "auth", RC, locked + ["-a", "wrong", "--no-auth-warning", "GET", "k"])
subprocess.run(cli + ["CONFIG", "SET", "maxmemory", "1"], capture_output=True)
case("r-redis-oom", "quota_exceeded", RC, cli + ["SET", "report", "x" * 1000])
subprocess.run(cli + ["CONFIG", "SET", "maxmemory", "0"], capture_output=True)
case("r-redis-refused", "network", RC, ["redis-cli", "-h", "127.0.0.1", "-p", str(closed), "PING"])
for s in servers:
    s.terminate()
    s.wait()

# ---------------------------------------------------------------- sqlite3 shell
SQ = "sqlite3 " + first_line(["sqlite3", "--version"]).split()[0]
db = os.path.join(WORK, "agent.db")
subprocess.run(["sqlite3", db, "CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT UNIQUE); INSERT INTO users (email) VALUES ('a@example.com');"])
case("r-sqlite3-no-table", "not_found", SQ, ["sqlite3", db, "SELECT * FROM orders;"])
case("r-sqlite3-unique", "conflict", SQ, ["sqlite3", db, "INSERT INTO users (email) VALUES ('a@example.com');"])
case("r-sqlite3-syntax", "validation", SQ, ["sqlite3", db, "SELEC * FROM users;"])
case("r-sqlite3-cannot-open", "not_found", SQ, ["sqlite3", "/srv/agent/missing/agent.db", "SELECT 1;"])

# ---------------------------------------------------------------- git
G = first_line(["git", "--version"])
env = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.com", "GIT_COMMITTER_NAME": "a",
       "GIT_COMMITTER_EMAIL": "a@example.com", "GIT_CONFIG_GLOBAL": "/dev/null"}
plain = os.path.join(WORK, "plain")
os.mkdir(plain)
case("r-git-not-a-repo", "not_found", G, ["git", "status"], cwd=plain, env={**env, "GIT_CEILING_DIRECTORIES": WORK})
repo = os.path.join(WORK, "repo")
run = lambda *cmd: subprocess.run(cmd, cwd=repo, capture_output=True, env={**os.environ, **env})
os.mkdir(repo)
run("git", "init", "-q", "-b", "main")
open(os.path.join(repo, "a.txt"), "w").write("one\n")
run("git", "add", "a.txt")
run("git", "commit", "-qm", "one")
case("r-git-pathspec", "not_found", G, ["git", "add", "notes.md"], cwd=repo, env=env)
case("r-git-branch-exists", "conflict", G, ["git", "branch", "main"], cwd=repo, env=env)
case("r-git-unknown-revision", "not_found", G, ["git", "checkout", "feature/login"], cwd=repo, env=env)
run("git", "checkout", "-qb", "other")
open(os.path.join(repo, "a.txt"), "w").write("two\n")
run("git", "commit", "-qam", "two")
run("git", "checkout", "-q", "main")
open(os.path.join(repo, "a.txt"), "w").write("three\n")
run("git", "commit", "-qam", "three")
case("r-git-merge-conflict", "conflict", G, ["git", "merge", "other"], cwd=repo, env=env)
run("git", "merge", "--abort")
open(os.path.join(repo, "a.txt"), "w").write("local edit\n")
case("r-git-checkout-overwrite", "conflict", G, ["git", "checkout", "other"], cwd=repo, env=env)
run("git", "checkout", "--", "a.txt")
bare = os.path.join(WORK, "origin.git")
subprocess.run(["git", "clone", "-q", "--bare", repo, bare], capture_output=True)
run("git", "commit", "-q", "--allow-empty", "-m", "local")
subprocess.run(["git", "--git-dir", bare, "branch", "-f", "main", "other"], capture_output=True)
run("git", "remote", "add", "origin", bare)
case("r-git-push-rejected", "conflict", G, ["git", "push", "origin", "main"], cwd=repo, env=env)
case("r-git-clone-missing", "not_found", G, ["git", "clone", os.path.join(WORK, "nope.git")], env=env)

# ---------------------------------------------------------------- curl against loopback servers


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path.startswith("/private.git/"):
            # A git host asking for credentials, as a private repository's does.
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/slow":
            time.sleep(3)
        status = {"/404": 404, "/503": 503, "/429": 429, "/401": 401}.get(self.path, 200)
        if self.path == "/empty":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")


class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass


server = Server(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
http = f"http://127.0.0.1:{server.server_address[1]}"
REPLACE.append((str(server.server_address[1]), "8787"))
C = first_line(["curl", "--version"]).split(" (")[0]
case("r-curl-refused", "network", C, ["curl", "-sS", f"http://127.0.0.1:{closed}/"])
case("r-curl-timeout", "timeout", C, ["curl", "-sS", "--max-time", "0.5", f"{http}/slow"])
case("r-curl-dns", "network", C, ["curl", "-sS", "http://api.nonexistent.invalid/"])
case("r-curl-404", "not_found", C, ["curl", "-sSf", f"{http}/404"])
case("r-curl-503", "unavailable", C, ["curl", "-sSf", f"{http}/503"])
case("r-curl-429", "rate_limited", C, ["curl", "-sSf", f"{http}/429"])
case("r-curl-401", "auth", C, ["curl", "-sSf", f"{http}/401"])
case("r-curl-empty-reply", "network", C, ["curl", "-sS", f"{http}/empty"])
case("r-curl-tls-on-plain", "network", C, ["curl", "-sS", f"https://127.0.0.1:{server.server_address[1]}/"])
case("r-curl-bad-url", "validation", C, ["curl", "-sS", "http://exa mple.com/"])
# git over HTTP with no credential to give (no terminal to ask on, as for an agent's shell tool).
case("r-git-http-no-credentials", "auth", G, ["git", "clone", f"{http}/private.git", os.path.join(WORK, "private")],
     env={**env, "GIT_TERMINAL_PROMPT": "0"})
server.shutdown()

# ---------------------------------------------------------------- jq
J = first_line(["jq", "--version"])
case("r-jq-cannot-index", "validation", J, ["jq", ".items[0].name"], input='{"items": {"name": "x"}}')
case("r-jq-parse-input", "format", J, ["jq", "."], input="{'name': 'x'}")
case("r-jq-compile", "validation", J, ["jq", ".items[] | select(.price > )"], input="{}")
case("r-jq-missing-file", "not_found", J, ["jq", ".", "/srv/agent/data.json"])

# ---------------------------------------------------------------- make
M = first_line(["make", "--version"])
mk = os.path.join(WORK, "mk")
os.mkdir(mk)
open(os.path.join(mk, "Makefile"), "w").write(
    "build:\n\tcc -o app main.c\n\ntest:\n\t./run-tests.sh\n\nlint:\n\tfalse\n")
open(os.path.join(mk, "main.c"), "w").write("int main(void) { return undefined_name; }\n")
case("r-make-no-rule", "not_found", M, ["make", "deploy"], cwd=mk)
case("r-make-cc-error", "validation", M + ", cc", ["make", "build"], cwd=mk)
case("r-make-missing-script", "not_found", M, ["make", "test"], cwd=mk)
case("r-make-step-failed", "unknown", M, ["make", "lint"], cwd=mk)
case("r-make-no-makefile", "not_found", M, ["make"], cwd=plain)

# ---------------------------------------------------------------- npm
NPM = "npm " + first_line(["npm", "--version"])
pkg = os.path.join(WORK, "pkg")
os.mkdir(pkg)
json.dump({"name": "agent-tool", "version": "1.0.0", "scripts": {"test": "node -e \"process.exit(3)\"",
          "build": "tsc -p ."}}, open(os.path.join(pkg, "package.json"), "w"))
case("r-npm-missing-script", "not_found", NPM, ["npm", "run", "deploy"], cwd=pkg)
case("r-npm-script-failed", "unknown", NPM, ["npm", "test"], cwd=pkg)
case("r-npm-script-command-missing", "not_found", NPM, ["npm", "run", "build"], cwd=pkg)
case("r-npm-no-package-json", "not_found", NPM, ["npm", "run", "build"], cwd=plain)
case("r-npm-install-404", "not_found", NPM, ["npm", "install", "--no-audit", "--no-fund", "rebound-holdout-no-such-package-zq"], cwd=pkg)
# A package whose peer dependency the project's own version does not meet (react-dom 18 wants react 18).
peers = os.path.join(WORK, "peers")
os.mkdir(peers)
json.dump({"name": "agent-ui", "version": "1.0.0", "dependencies": {"react": "17.0.2"}}, open(os.path.join(peers, "package.json"), "w"))
case("r-npm-eresolve", "conflict", NPM, ["npm", "install", "--no-audit", "--no-fund", "react-dom@18.3.1"], cwd=peers)

# ---------------------------------------------------------------- pip
PIP = " ".join(first_line([sys.executable, "-m", "pip", "--version"]).split()[:2])
case("r-pip-no-distribution", "not_found", PIP, [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "rebound-holdout-no-such-package-zq"])
case("r-pip-invalid-requirement", "validation", PIP, [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "requests=2.31"])
# Debian's own interpreter refuses pip installs into its site-packages (PEP 668).
case("r-pip-externally-managed", "validation", " ".join(first_line(["/usr/bin/python3", "-m", "pip", "--version"]).split()[:2]) + " (Debian's python3)",
     ["/usr/bin/python3", "-m", "pip", "install", "--disable-pip-version-check", "rebound-holdout-no-such-package-zq"])
case("r-pip-no-such-requirements-file", "not_found", PIP, [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "-r", "requirement.txt"])

# ---------------------------------------------------------------- kubectl against a loopback API server
# The server answers discovery (the core group's pods and configmaps) and, on the paths below, the
# Status objects a Kubernetes API server answers with; kubectl writes them out in its own words.
KUBECTL = "kubectl " + json.loads(subprocess.run(["kubectl", "version", "--client", "-o", "json"], capture_output=True,
                                                 text=True).stdout)["clientVersion"]["gitVersion"]
KUBE_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def kube_status(code, reason, message, **details):
    return code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
                  "reason": reason, **({"details": details} if details else {}), "code": code}


KUBE_ROUTES = {
    "/api": (200, {"kind": "APIVersions", "versions": ["v1"],
                   "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}]}),
    "/apis": (200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}),
    "/api/v1": (200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
        {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod", "verbs": KUBE_VERBS, "shortNames": ["po"]},
        {"name": "configmaps", "singularName": "configmap", "namespaced": True, "kind": "ConfigMap", "verbs": KUBE_VERBS,
         "shortNames": ["cm"]}]}),
    "/api/v1/namespaces/default/pods/web-7d9f": kube_status(404, "NotFound", 'pods "web-7d9f" not found', name="web-7d9f", kind="pods"),
    "/api/v1/namespaces/prod/pods": kube_status(403, "Forbidden", 'pods is forbidden: User "system:serviceaccount:default:agent" '
                                                'cannot list resource "pods" in API group "" in the namespace "prod"', kind="pods"),
    "/api/v1/namespaces/default/configmaps": kube_status(409, "AlreadyExists", 'configmaps "settings" already exists',
                                                         name="settings", kind="configmaps"),
    "/api/v1/namespaces/busy/pods": kube_status(503, "ServiceUnavailable", "the server is currently unable to handle the request"),
    "/api/v1/namespaces/locked/pods": kube_status(401, "Unauthorized", "Unauthorized"),
}


class KubeHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/api/v1/namespaces/slow/pods":
            time.sleep(3)
        code, body = KUBE_ROUTES.get(path, (200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": []}))
        data = json.dumps(body).encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (the timeout case)
            pass

    do_POST = do_GET


kube = ThreadingHTTPServer(("127.0.0.1", 0), KubeHandler)
threading.Thread(target=kube.serve_forever, daemon=True).start()
REPLACE.append((str(kube.server_address[1]), "8787"))
kube_env = {"HOME": WORK, "KUBECONFIG": os.path.join(WORK, "no-kubeconfig")}
k = ["kubectl", f"--server=http://127.0.0.1:{kube.server_address[1]}"]
case("r-kubectl-resource-type", "validation", KUBECTL, k + ["get", "deploymens"], env=kube_env)
case("r-kubectl-not-found", "not_found", KUBECTL, k + ["get", "pod", "web-7d9f"], env=kube_env)
case("r-kubectl-forbidden", "permission_denied", KUBECTL, k + ["get", "pods", "-n", "prod"], env=kube_env)
case("r-kubectl-already-exists", "conflict", KUBECTL, k + ["create", "configmap", "settings", "--from-literal=mode=fast"], env=kube_env)
case("r-kubectl-unavailable", "unavailable", KUBECTL, k + ["get", "pods", "-n", "busy"], env=kube_env)
case("r-kubectl-unauthorized", "auth", KUBECTL, k + ["get", "pods", "-n", "locked"], env=kube_env)
case("r-kubectl-timeout", "timeout", KUBECTL, k + ["get", "pods", "-n", "slow", "--request-timeout=1s"], env=kube_env)
case("r-kubectl-refused", "network", KUBECTL, ["kubectl", f"--server=http://127.0.0.1:{closed}", "get", "pods"], env=kube_env)
kube.shutdown()

# ---------------------------------------------------------------- ssh and git over it, against a loopback SSH server
# paramiko's server, with a host key of its own, refusing every public key; OpenSSH's client with a
# known_hosts file that first lacks that key, then holds it, then holds another for the same host.
import paramiko

SSH = subprocess.run(["ssh", "-V"], capture_output=True, text=True).stderr.strip().split(",")[0]  # on stderr
ssh_host_key = paramiko.ECDSAKey.generate()


class RefusingKeys(paramiko.ServerInterface):
    def get_allowed_auths(self, username):
        return "publickey"

    def check_auth_publickey(self, username, key):
        return paramiko.AUTH_FAILED


ssh_listener = socket.socket()
ssh_listener.bind(("127.0.0.1", 0))
ssh_listener.listen()
ssh_port = ssh_listener.getsockname()[1]
REPLACE.append((str(ssh_port), "8787"))


def ssh_serve():
    while True:
        conn, _ = ssh_listener.accept()

        def one(conn=conn):
            transport = paramiko.Transport(conn)
            transport.add_server_key(ssh_host_key)
            try:
                transport.start_server(server=RefusingKeys())
                transport.accept(10)
            except Exception:  # the client hung up: that is the case
                pass
            finally:
                transport.close()
        threading.Thread(target=one, daemon=True).start()


threading.Thread(target=ssh_serve, daemon=True).start()
known_hosts, ssh_key = os.path.join(WORK, "known_hosts"), os.path.join(WORK, "id_ed25519")
subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", ssh_key], check=True)
ssh = ["ssh", "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={known_hosts}", "-o", "IdentitiesOnly=yes", "-i", ssh_key]
git_remote = f"ssh://git@127.0.0.1:{ssh_port}/acme/app.git"


def over_ssh(checking):
    return {"GIT_SSH_COMMAND": " ".join(ssh + ["-o", f"StrictHostKeyChecking={checking}"])}


case("r-git-ssh-host-key-unknown", "auth", f"{G}, {SSH}", ["git", "ls-remote", git_remote], env=over_ssh("yes"))
case("r-ssh-host-key-unknown", "auth", SSH, ssh + ["-p", str(ssh_port), "-o", "StrictHostKeyChecking=yes", "git@127.0.0.1", "true"])
case("r-ssh-publickey", "auth", SSH, ssh + ["-p", str(ssh_port), "-o", "StrictHostKeyChecking=accept-new", "git@127.0.0.1", "true"])
case("r-git-ssh-publickey", "auth", f"{G}, {SSH}", ["git", "ls-remote", git_remote], env=over_ssh("yes"))
# Another server's key recorded for this host: OpenSSH's warning that it changed.
other_key = paramiko.ECDSAKey.generate()
open(known_hosts, "w").write(f"[127.0.0.1]:{ssh_port} {other_key.get_name()} {other_key.get_base64()}\n")
case("r-ssh-host-key-changed", "auth", SSH, ssh + ["-p", str(ssh_port), "-o", "StrictHostKeyChecking=yes", "git@127.0.0.1", "true"])

# ---------------------------------------------------------------- PostgreSQL 15, through psql
# A cluster of its own on a loopback port, run as the postgres user (the server refuses root).
PG_BIN = "/usr/lib/postgresql/15/bin"
PG = "PostgreSQL " + first_line([f"{PG_BIN}/postgres", "--version"]).split()[2] + ", psql"
pg_data, pg_port = os.path.join(WORK, "pg"), free_port()
REPLACE.append((str(pg_port), "8787"))
os.chmod(WORK, 0o755)
os.mkdir(pg_data)
shutil.chown(pg_data, "postgres", "postgres")
as_postgres = ["runuser", "-u", "postgres", "--"]
pg_password = os.path.join(WORK, "pg-password")
open(pg_password, "w").write("pg")
shutil.chown(pg_password, "postgres", "postgres")
subprocess.run(as_postgres + [f"{PG_BIN}/initdb", "-D", pg_data, "-A", "scram-sha-256", f"--pwfile={pg_password}", "-U", "postgres"],
               capture_output=True, check=True)
subprocess.run(as_postgres + [f"{PG_BIN}/pg_ctl", "-D", pg_data, "-w", "-l", os.path.join(pg_data, "log"), "start", "-o",
                              f"-p {pg_port} -k {pg_data} -c listen_addresses=127.0.0.1 -c max_connections=6 "
                              "-c superuser_reserved_connections=3"], capture_output=True, check=True)
pg_env = {**os.environ, "PGHOST": "127.0.0.1", "PGPORT": str(pg_port), "PGUSER": "postgres", "PGPASSWORD": "pg",
          "PGDATABASE": "postgres"}
PSQL = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1"]


def pg_case(id, category, sql, **env):
    case(id, category, PG, PSQL + ["-c", sql], env={**pg_env, **env})


def pg_run(sql):
    subprocess.run(PSQL + ["-c", sql], env=pg_env, capture_output=True, check=True)


def pg_print(id, category, process):
    """A case whose psql was run by hand (a second session acts on it meanwhile)."""
    _, err = process.communicate()
    report(id, category, PG, err.strip(), process.returncode)


pg_run("""
    CREATE TABLE users (id serial PRIMARY KEY, email text NOT NULL UNIQUE);
    CREATE TABLE orders (id serial PRIMARY KEY, user_id int NOT NULL REFERENCES users (id), total int);
    INSERT INTO users (email) VALUES ('a@example.com');
    INSERT INTO orders (user_id, total) VALUES (1, 10);
    CREATE ROLE reader LOGIN PASSWORD 'pw';
    CREATE ROLE limited LOGIN PASSWORD 'pw' CONNECTION LIMIT 1;
""")
pg_case("r-psql-undefined-table", "not_found", "SELECT * FROM invoices;")
pg_case("r-psql-undefined-column", "not_found", "SELECT emial FROM users;")
pg_case("r-psql-syntax", "validation", "SELEC * FROM users;")
pg_case("r-psql-invalid-input", "validation", "SELECT * FROM users WHERE id = 'abc';")
pg_case("r-psql-unique", "conflict", "INSERT INTO users (email) VALUES ('a@example.com');")
pg_case("r-psql-not-null", "validation", "INSERT INTO users (email) VALUES (NULL);")
pg_case("r-psql-foreign-key-missing", "not_found", "INSERT INTO orders (user_id, total) VALUES (999, 5);")
pg_case("r-psql-foreign-key-referenced", "conflict", "DELETE FROM users WHERE id = 1;")
pg_case("r-psql-read-only", "permission_denied", "BEGIN READ ONLY; INSERT INTO users (email) VALUES ('b@example.com');")
pg_case("r-psql-statement-timeout", "timeout", "SET statement_timeout = 100; SELECT pg_sleep(2);")
pg_case("r-psql-permission", "permission_denied", "SELECT * FROM users;", PGUSER="reader", PGPASSWORD="pw")
pg_case("r-psql-password", "auth", "SELECT 1;", PGUSER="reader", PGPASSWORD="wrong")
pg_case("r-psql-refused", "network", "SELECT 1;", PGPORT=str(closed))
# A second session while the role's one allowed session is open.
holder = subprocess.Popen(PSQL + ["-c", "SELECT pg_sleep(3);"], env={**pg_env, "PGUSER": "limited", "PGPASSWORD": "pw"},
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(1)
pg_case("r-psql-too-many-connections", "unavailable", "SELECT 1;", PGUSER="limited", PGPASSWORD="pw")
holder.wait()
# Every connection a role without SUPERUSER may have is taken (6, less the 3 kept for superusers).
holders = [subprocess.Popen(PSQL + ["-c", "SELECT pg_sleep(3);"], env={**pg_env, "PGUSER": "reader", "PGPASSWORD": "pw"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(3)]
time.sleep(1)
pg_case("r-psql-reserved-slots", "unavailable", "SELECT 1;", PGUSER="reader", PGPASSWORD="pw")
for h in holders:
    h.wait()
# A session the server ends mid-query (as a failover or a restart ends it): another terminates it.
victim = subprocess.Popen(PSQL + ["-c", "SELECT pg_sleep(5);"], env={**pg_env, "PGAPPNAME": "victim"},
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
time.sleep(1)
pg_run("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'victim';")
pg_print("r-psql-terminated", "unavailable", victim)
# Two repeatable-read transactions updating one row: the later to commit cannot be serialized.
first = subprocess.Popen(PSQL, env=pg_env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
first.stdin.write("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT total FROM orders WHERE id = 1;\n")
first.stdin.flush()
time.sleep(1)
pg_run("UPDATE orders SET total = 20 WHERE id = 1;")
first.stdin.write("UPDATE orders SET total = 30 WHERE id = 1;\nCOMMIT;\n")
first.stdin.close()
first.stdin = None
pg_print("r-psql-serialization", "conflict", first)
subprocess.run(as_postgres + [f"{PG_BIN}/pg_ctl", "-D", pg_data, "-w", "stop", "-m", "fast"], capture_output=True)

shutil.rmtree(WORK)
