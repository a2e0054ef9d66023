"""Python failures for the trace set: each scenario really fails and its traceback, as the
interpreter prints it, becomes one file. Run by regenerate.sh: python3 failures.py NAME."""

import asyncio
import http.server
import json
import socket
import sqlite3
import subprocess
import sys
import threading
import time


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(status: int, body: bytes, headers=(), delay: float = 0.0) -> str:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            time.sleep(delay)
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.do_GET()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def fetch_page(url):
    import httpx
    with httpx.Client(timeout=2) as client:
        return client.get(url).raise_for_status().text


def search_web(query):
    return fetch_page(f"http://127.0.0.1:{closed_port()}/search?q={query}")


def httpx_connect():
    search_web("rust sidecar")


def requests_connect():
    import requests
    def load_profile(user):
        return requests.get(f"http://127.0.0.1:{closed_port()}/users/{user}", timeout=2).json()
    load_profile("ada")


def requests_timeout():
    import requests
    url = serve(200, b"late", delay=3)
    def get_report(day):
        return requests.get(f"{url}/reports/{day}", timeout=0.5).text
    get_report("2026-11-24")


def httpx_429():
    url = serve(429, b'{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}',
                headers=[("Retry-After", "20")])
    fetch_page(url + "/v1/chat/completions")


def pydantic_validation():
    from pydantic import BaseModel

    class SearchArgs(BaseModel):
        query: str
        limit: int
        site: str | None = None

    def parse_tool_call(arguments):
        return SearchArgs.model_validate_json(arguments)

    parse_tool_call('{"query": null, "limit": "ten"}')


def tool_arguments():
    # A model's tool call with the arguments it wrote (argv[2]), parsed as an agent loop does: malformed
    # arguments fail through the same frames, however they are malformed.
    def parse_arguments(raw):
        return json.loads(raw)
    def call_tool(name, raw_arguments):
        arguments = parse_arguments(raw_arguments)
        return name, arguments
    call_tool("search_web", sys.argv[2])


def json_decode():
    url = serve(502, b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>")
    import requests
    def call_api(path):
        response = requests.get(url + path, timeout=2)
        return response.json()
    call_api("/v1/models")


def key_error():
    orders = [{"id": 1, "customer_id": 7}, {"id": 2}]
    def totals_by_customer(rows):
        out = {}
        for row in rows:
            out[row["customer_id"]] = out.get(row["customer_id"], 0) + 1
        return out
    def build_report(rows):
        return {"by_customer": totals_by_customer(rows)}
    build_report(orders)


def file_not_found():
    def read_config(path):
        with open(path) as f:
            return f.read()
    read_config("/etc/agent/tools.yaml")


def raise_from():
    def load_settings(text):
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise RuntimeError("settings file is not valid JSON") from e
    load_settings('{"model": "gpt-4o", "temperature": 0.2,}')


def during_handling():
    cache = {}
    def lookup(key):
        try:
            return cache[key]
        except KeyError:
            return fetch_and_store(key)
    def fetch_and_store(key):
        value = int(key.split("-")[1])
        cache[key] = value
        return value
    lookup("item-abc")


def exception_group():
    async def fetch(name, delay):
        await asyncio.sleep(delay)
        raise ConnectionError(f"{name}: connection reset by peer")
    async def gather_sources():
        async with asyncio.TaskGroup() as tg:
            tg.create_task(fetch("news", 0.01))
            tg.create_task(fetch("weather", 0.02))
    asyncio.run(gather_sources())


def asyncio_timeout():
    async def slow_tool():
        await asyncio.sleep(5)
    async def call_with_deadline():
        await asyncio.wait_for(slow_tool(), timeout=0.1)
    asyncio.run(call_with_deadline())


def called_process():
    def run_linter(path):
        subprocess.run(["ls", path], check=True, capture_output=True)
    run_linter("/nonexistent/project")


def subprocess_timeout():
    def run_shell(cmd):
        subprocess.run(cmd, shell=True, timeout=0.2)
    run_shell("sleep 5")


def sqlite_integrity():
    db = sqlite3.connect(":memory:")
    db.execute("create table users (id integer primary key, email text unique)")
    def add_user(email):
        db.execute("insert into users (email) values (?)", (email,))
    add_user("ada@example.com")
    add_user("ada@example.com")


def recursion():
    def walk(node):
        return walk({"child": node})
    walk({})


def attribute_none():
    def first_result(results):
        return results.get("items")[0]
    def summarize(results):
        return first_result(results).title()
    summarize({"items": None})


def zero_division():
    def average(xs):
        return sum(xs) / len(xs)
    average([])


def openai_429():
    import openai
    url = serve(429, json.dumps({"error": {
        "message": "Rate limit reached for gpt-4o in organization org-rebound on tokens per min (TPM): Limit 30000, "
                   "Used 29850, Requested 1200. Please try again in 2.1s.",
        "type": "tokens", "param": None, "code": "rate_limit_exceeded"}}).encode(),
        headers=[("Content-Type", "application/json"), ("Retry-After", "3")])
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test-not-a-key", max_retries=0)
    def ask(question):
        return client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": question}])
    ask("Summarize the incident report")


def openai_context_length():
    import openai
    url = serve(400, json.dumps({"error": {
        "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in "
                   "131072 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}).encode(),
        headers=[("Content-Type", "application/json")])
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test-not-a-key", max_retries=0)
    def summarize(document):
        return client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": document}])
    summarize("long document")


def anthropic_overloaded():
    import anthropic
    url = serve(529, json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}).encode(),
                headers=[("Content-Type", "application/json")])
    client = anthropic.Anthropic(base_url=url, api_key="sk-ant-test-not-a-key", max_retries=0)
    def plan(goal):
        return client.messages.create(model="claude-sonnet-4-5", max_tokens=512,
                                      messages=[{"role": "user", "content": goal}])
    plan("Plan the data migration")


def sqlalchemy_integrity():
    from sqlalchemy import Column, Integer, String, create_engine
    from sqlalchemy.orm import Session, declarative_base
    Base = declarative_base()

    class User(Base):
        __tablename__ = "users"
        id = Column(Integer, primary_key=True)
        email = Column(String, unique=True)

    engine = create_engine("sqlite://")
    Base.metadata.create_all(engine)
    def register(session, email):
        session.add(User(email=email))
        session.commit()
    with Session(engine) as session:
        register(session, "ada@example.com")
        register(session, "ada@example.com")


def fastapi_500():
    from fastapi import FastAPI
    from fastapi.testclient import TestClient
    app = FastAPI()
    inventory = {"sku-1": {"count": 3}}

    @app.get("/items/{sku}")
    async def item(sku: str):
        return {"sku": sku, "count": inventory[sku]["count"]}

    TestClient(app).get("/items/sku-9")


def jinja_undefined():
    from jinja2 import Environment, StrictUndefined
    env = Environment(undefined=StrictUndefined)
    def render_prompt(values):
        return env.from_string("Answer as {{ persona.name }} about {{ topic }}").render(**values)
    render_prompt({"topic": "retries"})


def langchain_tool():
    from langchain_core.tools import tool

    @tool
    def lookup_customer(customer_id: str) -> str:
        """Looks a customer up in the CRM."""
        import requests
        return requests.get(f"http://127.0.0.1:{closed_port()}/customers/{customer_id}", timeout=2).text

    lookup_customer.invoke({"customer_id": "c-1042"})


def aiohttp_connect():
    import aiohttp

    async def fetch_weather(city):
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{closed_port()}/weather", params={"city": city}) as r:
                return await r.json()
    asyncio.run(fetch_weather("Lisbon"))


SCENARIOS = {f.__name__: f for f in [
    langchain_tool, aiohttp_connect,
    openai_429, openai_context_length, anthropic_overloaded, sqlalchemy_integrity, fastapi_500, jinja_undefined,
    httpx_connect, requests_connect, requests_timeout, httpx_429, pydantic_validation, json_decode,
    tool_arguments, key_error, file_not_found, raise_from, during_handling, exception_group, asyncio_timeout,
    called_process, subprocess_timeout, sqlite_integrity, recursion, attribute_none, zero_division,
]}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]]()
