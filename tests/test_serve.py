"""python -m ncae_cuda.serve as a client meets it: a real server process on a free loopback
port, spoken to over HTTP, every answer checked against the offline model (NCAE, a blend, a
baseline) on the same file (recommend, recommend_new, similar_items); every client mistake a
4xx with a one-line error; many clients at once, each with its own answer; SIGHUP with a good
and a damaged file; SIGTERM with requests in flight."""
import hashlib
import http.client
import importlib.util
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from ncae_cuda import load_model, make_model
from ncae_cuda.model.base import Model
from ncae_cuda.commands import serve
from ncae_cuda.data import datasets
from ncae_cuda.data.interactions import UnknownIds
from ncae_cuda.errors import NcaeError
from ncae_cuda.ops.emulator import CXX
from ncae_cuda.serving.app import shown as app_shown
from ncae_cuda.serving.server import listening_socket
from ncae_cuda.serving.batcher import Ask, score_batch

pytestmark = pytest.mark.extra("serve")

ROOT = Path(__file__).resolve().parents[1]
READY_SECONDS = 60                 # a server's start: imports, the model, the ready line
RTOL, ATOL = 1e-5, 1e-6            # float32 rounding: one user scored alone or in a batch
# small limits, so that each is met by a small request
LIMITS = ["--max-n", "40", "--max-users", "20", "--max-body-bytes", "2000"]
# the implicit model weighs a user's items by recency: a new user comes with their times
KINDS = {"implicit-user": {"feedback": "implicit", "based": "user", "recency_boost": 10.0},
         "explicit-item": {"feedback": "explicit", "based": "item"},
         "explicit-user": {"feedback": "explicit", "based": "user"},
         "explicit-both": {"feedback": "explicit", "based": "both"},
         "ease": {"model": "ease", "l2": 10.0}}                 # a baseline's file


class Server:
    """python -m ncae_cuda.serve MODEL --port 0 ... as a process, its URL from the ready line;
    its log in a file (stderr). wait=False: started, its URL once wait() has read that line
    (servers started together start side by side)."""

    def __init__(self, model: Path, *flags: str, prefix: tuple = ("-m", "ncae_cuda.serve"),
                 wait: bool = True):
        self.model, self.log = model, model.with_name(f"{model.stem}-{time.monotonic_ns()}.log")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, *prefix, str(model), "--port", "0", "--device", "cpu",
                 *flags], stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        if wait:
            self.wait()

    def wait(self) -> None:
        ready, _, _ = select.select([self.process.stdout], [], [], READY_SECONDS)
        line = self.process.stdout.readline() if ready else ""
        assert line.startswith(f"serving {self.model} on http://127.0.0.1:"), (
            line, self.logged())
        self.url = line.split()[-1]

    def logged(self) -> str:
        return self.log.read_text()

    def call(self, path: str, body=None, method=None) -> tuple[int, dict]:
        """(status, the JSON answer) of a request; body: JSON, or bytes as they are."""
        data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as e:
            text = e.read()
            return e.code, json.loads(text)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(30)
        finally:
            self.process.stdout.close()


def query(**params) -> str:
    return "?" + urllib.parse.urlencode(params)


def fit(kind: str, seed: int = 0) -> Model:
    data = datasets.load("synthetic-tiny")
    if "model" in KINDS[kind]:                              # a baseline: no network to train
        return make_model(KINDS[kind], device="cpu").fit(data)
    return make_model({"hidden": (8,), "seed": seed, **KINDS[kind]}, device="cpu").fit(
        data, epochs=2, verbose=False)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict:
    """Each kind's model, saved, and loaded back as the server loads it."""
    folder = tmp_path_factory.mktemp("serve")
    paths = {}
    for kind in KINDS:
        paths[kind] = folder / f"{kind}.npz"
        fit(kind).save(paths[kind])
    return {kind: (path, load_model(path, device="cpu")) for kind, path in paths.items()}


@pytest.fixture(scope="module")
def servers(models):
    """A server on each kind's model, with small limits and a batch window wide enough that
    concurrent requests share batches."""
    running = {kind: Server(path, *LIMITS, "--max-wait-ms", "20", wait=False)
               for kind, (path, _) in models.items()}
    for server in running.values():
        server.wait()
    yield running
    for server in running.values():
        assert server.stop() == 0, server.logged()


def assert_same_ranking(got: dict, items: np.ndarray, scores: np.ndarray, n: int) -> None:
    """The server's {"items", "scores"} is the offline row (items, scores, n + 1 long, so the
    n-th place's tie is seen): the same scores to float32 rounding, and the same items in the
    same order, except between items whose scores tie to that rounding."""
    real = np.isfinite(scores)
    items, scores = items[real], scores[real]
    assert len(got["items"]) == len(got["scores"]) == min(n, len(items))
    np.testing.assert_allclose(got["scores"], scores[:len(got["scores"])], rtol=RTOL, atol=ATOL)
    for place, item in enumerate(got["items"]):
        near = [np.isclose(scores[place], scores[other], rtol=RTOL, atol=ATOL)
                for other in (place - 1, place + 1) if 0 <= other < len(scores)]
        if not any(near):
            assert item == items[place].item(), place


def offline(model: Model, user, n: int, keep_seen=False, exclude=()) -> tuple:
    """The row the model's recommend gives, its candidates every item but the excluded ones."""
    items = None if not len(exclude) else np.setdiff1d(model.item_ids, exclude)
    found, scores = model.recommend([user], n=n + 1, filter_seen=not keep_seen, items=items)
    return found[0], scores[0]


@pytest.mark.parametrize("kind", KINDS)
def test_healthz_names_the_model_that_answers(kind, models, servers):
    path, model = models[kind]
    status, health = servers[kind].call("/healthz")
    assert status == 200 and health["status"] == "ok"
    assert health["model"] == str(path)
    assert health["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert (health["users"], health["items"]) == (len(model.user_ids), len(model.item_ids))
    # a baseline has no rows an autoencoder encodes: before, its based said "user"
    based = None if "model" in KINDS[kind] else KINDS[kind]["based"]
    assert (health["kind"], health["feedback"], health["based"], health["device"]) == (
        model.title, model.config.feedback, based, "cpu")
    # warmed before it listened: the first request pays for no compile
    assert "warmed up: one user scored in" in servers[kind].logged()


def test_the_server_runs_on_uvloop_where_it_is_installed(servers):
    """uvicorn picks uvloop's event loop where it is installed (the [serve] extra installs it
    where it builds), and only when uvicorn makes the loop itself."""
    uvloop = importlib.util.find_spec("uvloop") is not None
    assert ("event loop: uvloop." if uvloop else "event loop: asyncio.") in (
        servers["implicit-user"].logged())


def test_the_openapi_page_lists_the_endpoints_and_their_bodies(servers):
    status, spec = servers["implicit-user"].call("/openapi.json")
    assert status == 200
    assert set(spec["paths"]) == {"/healthz", "/recommend", "/recommend/new", "/similar"}
    body = spec["paths"]["/recommend"]["post"]["requestBody"]["content"]["application/json"]
    assert set(body["schema"]["properties"]) == {"users", "n", "exclude", "keep_seen"}


def test_the_openapi_page_states_the_limits_and_the_error_answers(servers):
    """LIMITS' --max-n 40 and --max-users 20 on n and users, and each 4xx an endpoint gives
    with its {"error": ...} body (the schema said neither)."""
    _, spec = servers["implicit-user"].call("/openapi.json")
    paths = spec["paths"]
    bodies = {path: paths[path]["post"]["requestBody"]["content"]["application/json"]["schema"]
              for path in ("/recommend", "/recommend/new")}
    for schema in bodies.values():
        assert (schema["properties"]["n"]["minimum"], schema["properties"]["n"]["maximum"]) == (
            1, 40)
    users = bodies["/recommend"]["properties"]["users"]
    assert (users["minItems"], users["maxItems"]) == (1, 20)
    for path in ("/recommend", "/similar"):
        n = next(p for p in paths[path]["get"]["parameters"] if p["name"] == "n")
        assert (n["schema"]["minimum"], n["schema"]["maximum"]) == (1, 40)
    for path, method in (("/recommend", "get"), ("/recommend", "post"),
                         ("/recommend/new", "post"), ("/similar", "get")):
        answers = paths[path][method]["responses"]
        assert {"400", "404", "422", "503"} <= set(answers), (path, method)
        assert ("413" in answers) == (method == "post")
        error = answers["404"]["content"]["application/json"]["schema"]["$ref"].split("/")[-1]
        assert spec["components"]["schemas"][error]["properties"] == {
            "error": {"title": "Error", "type": "string"}}


@pytest.mark.parametrize("kind", KINDS)
def test_get_recommend_is_ncae_recommend(kind, models, servers):
    _, model = models[kind]
    rng = np.random.default_rng(1)
    for user in rng.choice(model.user_ids, 8, replace=False):
        for n, keep_seen in ((5, False), (int(rng.integers(1, 40)), True), (40, False)):
            status, got = servers[kind].call(
                "/recommend" + query(user=user, n=n, keep_seen=str(keep_seen).lower()))
            assert status == 200 and got["user"] == user.item()
            assert_same_ranking(got, *offline(model, user, n, keep_seen), n)
    # the default n, recommend's own
    _, got = servers[kind].call("/recommend" + query(user=model.user_ids[0]))
    assert len(got["items"]) == 10


@pytest.mark.parametrize("kind", ["implicit-user", "explicit-item"])
def test_post_recommend_answers_each_user_without_its_excluded_items(kind, models, servers):
    """The server asks recommend for n + len(exclude) and drops the excluded items; the
    reference restricts recommend's candidates instead."""
    _, model = models[kind]
    rng = np.random.default_rng(2)
    users = rng.choice(model.user_ids, 6, replace=False).tolist()
    users.append(users[0])                                  # a user twice: answered twice
    exclude = rng.choice(model.item_ids, 7, replace=False)
    status, got = servers[kind].call("/recommend", {"users": users, "n": 12,
                                                    "exclude": exclude.tolist()})
    assert status == 200 and [r["user"] for r in got["results"]] == users
    for user, result in zip(users, got["results"]):
        assert not set(result["items"]) & set(exclude.tolist())
        assert_same_ranking(result, *offline(model, user, 12, exclude=exclude), 12)


@pytest.mark.parametrize("kind", ["implicit-user", "explicit-user"])
def test_recommend_new_folds_a_user_in_as_recommend_new_does(kind, models, servers):
    _, model = models[kind]
    rng = np.random.default_rng(3)
    for keep_seen in (False, True):
        picked = rng.choice(len(model.item_ids), 6, replace=False)
        ratings = rng.integers(1, 6, len(picked)).astype(float)
        times = rng.permutation(len(picked)) * 1000.0 + 1e9
        at, shape = (np.zeros(len(picked), int), picked), (1, len(model.item_ids))
        ask = {"items": model.item_ids[picked].tolist(), "n": 8, "keep_seen": keep_seen}
        if kind == "explicit-user":
            X_new, when = sp.csr_matrix((ratings, at), shape=shape), None
            ask["ratings"] = ratings.tolist()
        else:
            X_new = sp.csr_matrix((np.ones(len(picked)), at), shape=shape)
            when = sp.csr_matrix((times, at), shape=shape)
            ask["times"] = times.tolist()
        items, scores = model.recommend_new(X_new, n=9, filter_seen=not keep_seen, times=when)
        status, got = servers[kind].call("/recommend/new", ask)
        assert status == 200
        assert_same_ranking(got, items[0], scores[0], 8)
        assert keep_seen or not set(got["items"]) & set(ask["items"])


@pytest.mark.parametrize("kind", ["explicit-item", "explicit-both"])
def test_recommend_new_on_an_item_based_model_says_why_not(kind, servers):
    status, got = servers[kind].call("/recommend/new", {"items": [1], "ratings": [4]})
    assert status == 400 and "item-based" in got["error"]


@pytest.mark.parametrize("kind", ["implicit-user", "explicit-item", "explicit-both"])
def test_similar_is_similar_items(kind, models, servers):
    _, model = models[kind]
    for item in model.item_ids[[0, 7, -1]]:
        items, scores = model.similar_items([item], n=7)
        status, got = servers[kind].call("/similar" + query(item=item, n=6))
        assert status == 200 and got["item"] == item.item() and item.item() not in got["items"]
        assert_same_ranking(got, items[0], scores[0], 6)


def test_a_baseline_is_served_as_ncae_is(models, servers):
    """EASE's file: /recommend/new is its recommend_new (a user with no history: no items, EASE
    having nothing to rank them by; before, the first item ids at a score of 0); /similar,
    which EASE does not answer, is a 400 saying so."""
    _, model = models["ease"]
    picked = np.array([0, 3, 5])
    X_new = sp.csr_matrix((np.ones(len(picked)), (np.zeros(len(picked), int), picked)),
                          shape=(1, len(model.item_ids)))
    items, scores = model.recommend_new(X_new, n=9)
    status, got = servers["ease"].call("/recommend/new", {
        "items": model.item_ids[picked].tolist(), "n": 8})
    assert status == 200 and not set(got["items"]) & set(model.item_ids[picked].tolist())
    assert_same_ranking(got, items[0], scores[0], 8)
    status, got = servers["ease"].call("/recommend/new", {"items": [], "n": 8})
    assert (status, got) == (200, {"items": [], "scores": []})
    status, got = servers["ease"].call("/similar" + query(item=model.item_ids[0], n=3))
    assert status == 400 and got["error"] == "EASE has no similarity of items"


ERRORS = [  # (method, path, body, status, what the error says)
    ("GET", "/recommend?user=9999", None, 404, "9999"),
    ("GET", "/recommend?user=abc", None, 404, "abc"),
    ("GET", "/recommend?n=3", None, 422, "user"),
    ("GET", "/recommend?user=1&n=0", None, 400, "n must be from 1 to 40"),
    ("GET", "/recommend?user=1&n=41", None, 400, "n must be from 1 to 40"),
    ("GET", "/recommend?user=1&n=ten", None, 422, "n"),
    ("GET", "/recommend?user=1&user=2", None, 400, "user: given more than once"),
    ("GET", "/similar?item=1&n=2&n=3", None, 400, "n: given more than once"),
    ("GET", "/recommend?user=1&keep_seen=maybe", None, 422, "keep_seen"),
    # a name the query does not have, refused as a body's field is: before, ignored (seen
    # items left out for keep-seen, the command line's spelling; 10 items for count=3)
    ("GET", "/recommend?user=1&keep-seen=true", None, 422,
     'keep-seen: Unexpected keyword argument (got "true")'),
    ("GET", "/similar?item=1&count=3", None, 422, "count: Unexpected keyword argument"),
    ("POST", "/recommend", {"users": [1, 9999, 8888]}, 404, "9999, 8888"),
    ("POST", "/recommend", {"users": [1], "exclude": [7777]}, 404, "7777"),
    ("POST", "/recommend", {"users": [1], "exclude": [10 ** 30]}, 404, str(10 ** 30)),
    ("POST", "/recommend", {"users": [1, -2 ** 63 - 1]}, 404, str(-2 ** 63 - 1)),
    ("POST", "/recommend", {"users": []}, 400, "1 to 20 users"),
    ("POST", "/recommend", {"users": list(range(1, 22))}, 400, "got 21"),
    ("POST", "/recommend", {"users": [1], "n": 41}, 400, "n must be"),
    ("POST", "/recommend", {"users": [1.5]}, 422, "integer or a string"),
    ("POST", "/recommend", {"users": [1], "n": "3"}, 422, "n"),
    ("POST", "/recommend", {"users": [1], "nn": 3}, 422, "nn"),
    ("POST", "/recommend", {"n": 3}, 422, "users"),
    ("POST", "/recommend", [1, 2], 422, "body"),
    ("POST", "/recommend", b'{"users": [1', 400, "malformed JSON"),
    ("POST", "/recommend", b"", 400, "malformed JSON"),
    ("POST", "/recommend", {"users": list(range(1, 21)), "exclude": ["x" * 40] * 60}, 413,
     "over 2000 bytes"),
    ("POST", "/recommend/new", {"items": [1, 2], "times": [1]}, 400, "times has 1 values"),
    ("POST", "/recommend/new", {"items": [1, 2]}, 400, "give \"times\""),
    ("POST", "/recommend/new", {"items": [1, 1], "times": [1, 2]}, 400, "more than once"),
    ("POST", "/recommend/new", {"items": [1, 5555], "times": [1, 2]}, 404, "5555"),
    ("POST", "/recommend/new", {"items": [1, 2 ** 64], "times": [1, 2]}, 404, str(2 ** 64)),
    ("GET", "/similar?item=6666", None, 404, "6666"),
    ("GET", "/similar?item=1&n=-1", None, 400, "n must be"),
    ("GET", "/nowhere", None, 404, "Not Found"),
    ("DELETE", "/recommend", None, 405, "Method Not Allowed"),
    # ids as written: a NUL found user 1; an empty id, a long one said in a short line
    ("GET", "/recommend?user=1%00", None, 400, "user id '1\\x00' holds a control character"),
    ("POST", "/recommend", {"users": [1, "2\n"]}, 400, "control character"),
    ("GET", "/recommend?user=", None, 404, "unknown to the model: '' (empty)"),
    ("GET", "/recommend?user=%201", None, 404, "unknown to the model: ' 1'"),
    ("GET", "/recommend?user=" + "x" * 1500, None, 404, "... (1500 characters)"),
    ("POST", "/recommend", {"users": [1], "n": "3"}, 422, 'n: Input should be a valid integer '
                                                          '(got "3")'),
    # the implicit model with recency: ratings and unreadable times refused, not ignored
    ("POST", "/recommend/new", {"items": [1], "times": [1], "ratings": [0]}, 400,
     'leave out "ratings"'),
    ("POST", "/recommend/new", {"items": [1, 2], "times": [1, "yesterday"]}, 422,
     'times.1: "yesterday" is not Unix seconds (an integer) or an ISO 8601 date and time'),
    ("POST", "/recommend/new", {"items": [1], "times": [None]}, 422, "times.0: a time is Unix "
                                                                   "seconds"),
]


@pytest.mark.parametrize("method, path, body, status, says", ERRORS,
                         ids=[f"{m} {p} {s}" for m, p, _, s, _ in ERRORS])
def test_a_client_mistake_is_a_4xx_with_one_line(method, path, body, status, says, servers):
    got_status, got = servers["implicit-user"].call(path, body, method)
    assert (got_status, list(got)) == (status, ["error"])
    assert says in got["error"] and "\n" not in got["error"], got["error"]
    assert len(got["error"]) < 300, got["error"]


EXPLICIT_ERRORS = [  # (body, what the error says): the explicit user-based model's 1-5 scale
    ({"items": [1, 2], "ratings": [4, 10]}, "ratings: 1 ratings outside the rating scale 1 to 5, "
                                            "e.g. 10 of item 2"),
    ({"items": [1, 2], "ratings": [1e38, 3]}, "e.g. 1e+38 of item 1"),
    ({"items": [3, 1], "ratings": [0, 3]}, "e.g. 0 of item 3 (a stored 0 is read as a rating"),
    ({"items": [1], "ratings": [-1]}, "negative values, e.g. -1.0 at row 0, item 1:"),
    ({"items": [1], "ratings": [3], "times": [5]}, 'leave out "times"'),
]


@pytest.mark.parametrize("body, says", EXPLICIT_ERRORS)
def test_recommend_new_refuses_what_the_model_would_misread(body, says, servers):
    """Ratings of 10, 1e38 or 0 were folded in, times ignored: each is a 400 naming the item."""
    status, got = servers["explicit-user"].call("/recommend/new", body)
    assert (status, list(got)) == (400, ["error"]) and says in got["error"], got["error"]


@pytest.mark.parametrize("kind", ["implicit-user", "explicit-user"])
def test_a_new_user_with_no_history_is_answered(kind, models, servers):
    """No items (with or without empty ratings and times) is a user with no history, answered
    as recommend_new answers an empty row: it was a 500 (a scipy matrix of no entries)."""
    _, model = models[kind]
    empty = sp.csr_matrix((1, len(model.item_ids)))
    items, scores = model.recommend_new(empty, n=6,
                                        times=empty if model.config.recency_boost else None)
    filled = "times" if model.config.implicit else "ratings"
    for ask in ({"items": [], "n": 5}, {"items": [], "n": 5, filled: []}):
        status, got = servers[kind].call("/recommend/new", ask)
        assert status == 200, got
        assert_same_ranking(got, items[0], scores[0], 5)


def test_iso_8601_times_are_unix_seconds(models, servers):
    """A new user's times as ISO 8601 text rank as the same times in seconds do."""
    _, model = models["implicit-user"]
    items = model.item_ids[[3, 9, 4]].tolist()
    iso = ["2024-03-01T12:00:00Z", "2024-03-01T13:00:00+02:00", "2024-03-02"]
    numbers = [1709294400, 1709290800, 1709337600]
    _, by_text = servers["implicit-user"].call("/recommend/new", {"items": items, "times": iso})
    _, by_number = servers["implicit-user"].call("/recommend/new",
                                                 {"items": items, "times": numbers})
    assert by_text == by_number and by_text["items"]


def test_a_405_says_which_methods_the_path_has(servers):
    request = urllib.request.Request(servers["implicit-user"].url + "/recommend",
                                     method="DELETE")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 405 and refused.value.headers["Allow"] == "GET, POST"


# schemathesis's checks of every answer but positive_data_acceptance: a schema-valid request
# names random ids, which the model does not know (a 404, as the schema says)
SCHEMATHESIS = ["--checks", "all", "--exclude-checks", "positive_data_acceptance",
                "--max-examples", "30", "--workers", "1", "--seed", "7"]


@pytest.mark.parametrize("kind", ["implicit-user", "explicit-user"])
def test_schemathesis_finds_no_server_error_nor_schema_violation(kind, servers, tmp_path):
    """Requests generated from the OpenAPI document (its valid and invalid values, methods the
    paths do not have): no 500, every answer as the document states it (status, body, Allow
    on a 405). Bounded: 30 cases an operation, about 10 s a server on 2 cores."""
    tool = Path(sys.executable).with_name("schemathesis")
    run = subprocess.run([str(tool), "run", servers[kind].url + "/openapi.json", *SCHEMATHESIS],
                         cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout[-4000:]
    assert " passed" in run.stdout and "failures" not in run.stdout, run.stdout[-4000:]


def test_an_explicit_model_needs_the_new_users_ratings(servers):
    status, got = servers["explicit-user"].call("/recommend/new", {"items": [1, 2]})
    assert status == 400 and "ratings" in got["error"]


def test_a_chunked_body_over_the_limit_is_refused_as_it_arrives(servers):
    """No Content-Length to refuse it by: the body is counted as it is read."""
    url = urllib.parse.urlsplit(servers["implicit-user"].url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    chunks = [b'{"users": [1], "exclude": ['] + [b'"' + b"y" * 100 + b'", '] * 30 + [b'"z"]}']
    connection.request("POST", "/recommend", body=iter(chunks), encode_chunked=True,
                       headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 413 and "over 2000 bytes" in json.loads(response.read())["error"]
    connection.close()


def test_many_clients_at_once_each_get_their_own_answer(models, servers):
    """Threads asking at once share batches (the batch count shows they did), and each answer
    is the offline one for its own users, n and exclusions."""
    _, model = models["implicit-user"]
    server = servers["implicit-user"]
    _, before = server.call("/healthz")
    rng = np.random.default_rng(4)
    asks = []
    for _ in range(96):
        users = rng.choice(model.user_ids, int(rng.integers(1, 4)), replace=False).tolist()
        exclude = rng.choice(model.item_ids, int(rng.integers(0, 4)), replace=False).tolist()
        asks.append((users, int(rng.integers(1, 30)), exclude, bool(rng.integers(2))))
    answers = [None] * len(asks)

    def client(first: int) -> None:
        for k in range(first, len(asks), 24):
            users, n, exclude, keep_seen = asks[k]
            answers[k] = server.call("/recommend", {"users": users, "n": n, "exclude": exclude,
                                                    "keep_seen": keep_seen})
    threads = [threading.Thread(target=client, args=(k,)) for k in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for (users, n, exclude, keep_seen), (status, got) in zip(asks, answers):
        assert status == 200 and [r["user"] for r in got["results"]] == users
        for user, result in zip(users, got["results"]):
            assert_same_ranking(result, *offline(model, user, n, keep_seen, exclude), n)
    _, after = server.call("/healthz")
    scored = sum(len(users) for users, _, _, _ in asks)
    assert after["users_scored"] - before["users_scored"] == scored
    assert after["batches"] - before["batches"] < len(asks) / 2


def test_sighup_reloads_a_good_file_and_keeps_the_model_for_a_damaged_one(tmp_path, models):
    path, first = tmp_path / "model.npz", models["implicit-user"][1]
    shutil.copy(models["implicit-user"][0], path)
    server = Server(path)
    try:
        _, health = server.call("/healthz")
        old_sha = health["sha256"]
        second = fit("implicit-user", seed=1)
        second.save(path)                          # atomic: the old file until the new is whole
        new_sha = hashlib.sha256(path.read_bytes()).hexdigest()
        server.process.send_signal(signal.SIGHUP)
        wait_for(lambda: server.call("/healthz")[1]["sha256"] == new_sha)
        user = first.user_ids[3]
        _, got = server.call("/recommend" + query(user=user, n=10))
        assert_same_ranking(got, *offline(second, user, 10), 10)

        good = path.read_bytes()
        path.write_bytes(good[:len(good) // 2])                # truncated
        server.process.send_signal(signal.SIGHUP)
        wait_for(lambda: "reload failed" in server.logged())
        assert "still serving" in server.logged() and new_sha in server.logged()
        _, health = server.call("/healthz")
        assert health["sha256"] == new_sha and new_sha != old_sha
        _, got = server.call("/recommend" + query(user=user, n=10))
        assert_same_ranking(got, *offline(second, user, 10), 10)
    finally:
        assert server.stop() == 0, server.logged()


def wait_for(condition, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.05)


def test_an_unknown_user_in_a_batch_fails_its_own_request_only(models):
    """A batch whose ids cannot all be looked up at once: the ask naming an unknown user (or
    item) is answered with the error naming it, and the others as they are offline."""
    _, model = models["implicit-user"]
    known = model.user_ids[:4].tolist()
    asks = [Ask([known[0], known[1]], 5, True, [], None, 0.0),
            Ask([known[2], "no-such-user"], 5, True, [], None, 0.0),
            Ask([known[3]], 3, False, [model.item_ids[0].item()], None, 0.0),
            Ask([known[1]], 4, True, ["no-such-item"], None, 0.0)]
    answers = score_batch(model, asks)
    assert isinstance(answers[1], UnknownIds) and "no-such-user" in str(answers[1])
    assert isinstance(answers[3], UnknownIds) and "no-such-item" in str(answers[3])
    for k in (0, 2):
        ask = asks[k]
        assert [row["user"] for row in answers[k]] == ask.users
        for user, row in zip(ask.users, answers[k]):
            assert_same_ranking(row, *offline(model, user, ask.n, not ask.filter_seen,
                                              ask.exclude), ask.n)


def test_a_bug_in_one_asks_lookup_fails_that_ask_only(models, monkeypatch):
    """Before: the batch's other asks failed with it (500 for requests without a fault)."""
    _, model = models["implicit-user"]
    known = model.user_ids[:2].tolist()
    lookup = model.data.item_lookup

    def buggy(wanted):
        if "bug" in wanted:
            raise ArithmeticError("a lookup's bug")
        return lookup(wanted)
    monkeypatch.setattr(model.data, "item_lookup", buggy)
    asks = [Ask([known[0]], 5, True, ["bug"], None, 0.0), Ask([known[1]], 5, True, [], None, 0.0)]
    answers = score_batch(model, asks)
    assert isinstance(answers[0], ArithmeticError)
    assert_same_ranking(answers[1][0], *offline(model, known[1], 5, False, []), 5)


def test_a_request_that_finds_none_waiting_is_scored_at_once(models):
    """Nothing to batch with: the answer does not wait out the batch window."""
    path, model = models["explicit-item"]
    server = Server(path, "--max-wait-ms", "5000")
    try:
        for user in model.user_ids[:3]:
            start = time.monotonic()
            status, got = server.call("/recommend" + query(user=user, n=5))
            assert status == 200 and time.monotonic() - start < 2.5
            assert_same_ranking(got, *offline(model, user, 5), 5)
        assert server.call("/healthz")[1]["batches"] == 3
    finally:
        assert server.stop() == 0, server.logged()


def test_sigterm_answers_the_requests_in_flight_then_exits_0(models):
    """The requests wait in a wide batch window when SIGTERM comes; each is answered, the
    process exits 0, and it listens no more."""
    path, model = models["explicit-item"]
    server = Server(path, "--max-wait-ms", "1500")
    users = np.resize(model.user_ids, 32)
    address = urllib.parse.urlsplit(server.url)

    def send() -> tuple[list, list]:
        """Every request sent before any is read, on connections opened beforehand, each
        answer read by a thread of its own: (the answers, None until read; the threads)."""
        answers = [None] * len(users)
        connections = [http.client.HTTPConnection(address.hostname, address.port, timeout=30)
                       for _ in users]
        for connection in connections:
            connection.connect()
        for connection, user in zip(connections, users):
            connection.request("GET", "/recommend" + query(user=user, n=5))

        def client(k: int) -> None:
            with connections[k].getresponse() as response:
                answers[k] = response.status, json.loads(response.read())
        threads = [threading.Thread(target=client, args=(k,)) for k in range(len(users))]
        for thread in threads:
            thread.start()
        return answers, threads

    def answered(answers, threads) -> None:
        for thread in threads:
            thread.join()
        for user, (status, got) in zip(users, answers):
            assert status == 200
            assert_same_ranking(got, *offline(model, user, 5), 5)
    # a request that finds none other open is scored at once (about a millisecond): whether
    # any waits in the window depends on how far apart the requests reach the server, so
    # rounds are sent until one leaves a request waiting, each round's answers checked
    for _ in range(20):
        answers, threads = send()
        time.sleep(0.5)
        if None in answers:
            break
        answered(answers, threads)
    assert None in answers, "no round left a request in the batch window"
    assert server.stop() == 0, server.logged()
    answered(answers, threads)
    with pytest.raises(urllib.error.URLError):
        server.call("/healthz")


@pytest.mark.skipif(CXX is None, reason="no g++")
def test_the_batched_path_runs_the_gpu_kernels_emulated(tmp_path, models):
    """--device gpu on the emulated GPU backend (the CUDA kernels compiled for the CPU): the
    batched topk launch answers as the offline model on the CPU does."""
    path, model = models["implicit-user"]
    code = ("import sys; from pathlib import Path; from ncae_cuda import ops as backends;"
            "from ncae_cuda.ops.emulator import emulated_backend;"
            f"ops = emulated_backend(Path({str(tmp_path)!r})); cpu = backends.get_backend;"
            "backends.get_backend = lambda d: ops if d == 'gpu' else cpu(d);"
            "from ncae_cuda.commands.serve import main; sys.exit(main(sys.argv[1:]))")
    start = ("-c", code)
    server = Server(path, "--device", "gpu", "--max-wait-ms", "50", prefix=start)
    try:
        users = model.user_ids[:10].tolist()
        status, got = server.call("/recommend", {"users": users, "n": 6})
        assert status == 200 and server.call("/healthz")[1]["device"] == "gpu"
        for user, result in zip(users, got["results"]):
            assert_same_ranking(result, *offline(model, user, 6), 6)
    finally:
        assert server.stop() == 0, server.logged()


def test_what_keeps_it_from_starting_is_one_line(models, capsys):
    """A missing model file, a port in use, a limit below 1: status 2 and one line."""
    path = models["implicit-user"][0]
    assert serve.main([str(path.with_name("none.npz"))]) == 2
    assert capsys.readouterr().err.startswith("error: ")
    with socket_in_use() as port:
        assert serve.main([str(path), "--port", str(port), "--device", "cpu"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: cannot listen on 127.0.0.1:") and err.count("\n") == 1
    with pytest.raises(SystemExit) as stopped:
        serve.main([str(path), "--max-users", "0"])
    assert stopped.value.code == 2 and "--max-users must be >= 1" in capsys.readouterr().err


def test_a_port_in_use_is_one_line_before_the_model_is_read(tmp_path, capsys):
    """Before, the port was bound after the model was loaded and warmed up (and its index
    built, with --index approximate: minutes for a large catalogue), so a port in use was
    said only then; here the model file is missing, and the port is what the line names."""
    with socket_in_use() as port:
        assert serve.main([str(tmp_path / "none.npz"), "--port", str(port)]) == 2
    assert capsys.readouterr().err == (
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use\n")


def test_the_servers_socket_listens_as_it_is_bound_so_a_second_one_is_refused():
    """Before, the socket was bound and listened only once uvicorn had started (a fraction of a
    second later): two servers started together on one port both bound it (SO_REUSEADDR lets
    sockets that do not listen share a port), and uvloop let the second one's failed listen
    pass, so it printed its ready line while nothing reached it."""
    import socket
    with listening_socket("127.0.0.1", 0) as first:
        port = first.getsockname()[1]
        with pytest.raises(NcaeError, match=f"cannot listen on 127.0.0.1:{port}: Address "
                                            "already in use"):
            listening_socket("127.0.0.1", port).close()
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass                          # queued by the kernel: the socket listens


# a flag's value the parser refuses, and what its line says was expected
OUT_OF_RANGE = [*(("--port", port, "a port number 0 to 65535")
                  for port in ["70000", "-1", "65536", "eighty"]),
                *(("--max-wait-ms", wait, "a number of milliseconds >= 0")
                  for wait in ["nan", "inf", "-1", "soon"])]


@pytest.mark.parametrize("flag, value, expected", OUT_OF_RANGE)
def test_a_flag_out_of_range_is_one_line_before_the_model_is_read(flag, value, expected,
                                                                   tmp_path, capsys):
    """Before, --port 70000 ended in bind()'s OverflowError traceback, -1 in getaddrinfo's
    'Servname not supported', after the model was loaded; --max-wait-ms nan was taken: the
    server started, and the first wait for a batch raised inside the batcher (uvloop cannot
    time out at NaN), so every later /recommend hung unanswered; inf held a batch open until
    another request came."""
    with pytest.raises(SystemExit) as stopped:
        serve.main([str(tmp_path / "none.npz"), flag, value])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err == (
        f"python -m ncae_cuda.serve: error: argument {flag}: expected {expected}, got "
        f"{value!r} (see --help)\n"), err


def test_without_the_extra_it_says_which_to_install(models, monkeypatch, capsys):
    find_spec = serve.importlib.util.find_spec
    monkeypatch.setattr(serve.importlib.util, "find_spec",
                        lambda name: None if name == "uvicorn" else find_spec(name))
    assert serve.main([str(models["implicit-user"][0])]) == 2
    assert capsys.readouterr().err == f"error: {serve.MISSING_EXTRA}\n"


class socket_in_use:
    def __enter__(self) -> int:
        import socket
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        return self.sock.getsockname()[1]

    def __exit__(self, *exc) -> None:
        self.sock.close()


# python -m ncae_cuda.serve with Model.recommend raising `raised` (after `delay` seconds) for a
# batch that holds user `marker`; the warm-up's first user is never the marker
FAILING_RECOMMEND = """
import functools, sys, time
from ncae_cuda.model.base import Model
class Planted(BaseException):
    '''what no answer can be made of: no Exception (as SystemExit, or a library's own)'''
recommend = Model.recommend
@functools.wraps(recommend)                  # its signature: the server reads n's default
def failing(model, users, *args, **kwargs):
    if {marker!r} in list(users):
        time.sleep({delay})
        raise {raised}("planted")
    return recommend(model, users, *args, **kwargs)
Model.recommend = failing
from ncae_cuda.commands.serve import main
sys.exit(main(sys.argv[1:]))
"""


def failing_server(path: Path, marker, raised: str, delay: float = 0.0) -> Server:
    code = FAILING_RECOMMEND.format(marker=marker, raised=raised, delay=delay)
    return Server(path, "--max-wait-ms", "200", prefix=("-c", code))


def test_a_stop_iteration_in_recommend_fails_its_request_only(models):
    """Before: a StopIteration cannot be set on an asyncio future, so the model thread's
    answer never reached the request: it hung, and every /recommend after it queued behind
    it for good."""
    path, model = models["implicit-user"]
    marker, other = model.user_ids[5].item(), model.user_ids[6].item()
    server = failing_server(path, marker, "StopIteration")
    try:
        status, got = server.call("/recommend" + query(user=marker, n=3))
        assert status == 500 and "StopIteration" in got["error"], got
        status, got = server.call("/recommend" + query(user=other, n=3))
        assert status == 200 and got["user"] == other
        assert server.call("/healthz")[1]["status"] == "ok"
    finally:
        assert server.stop() == 0, server.logged()


def test_a_batcher_that_stops_answers_every_request_at_once_and_healthz_says_so(models):
    """The marker's batch is scored for a second while the other requests queue behind it;
    then the scoring raises what is no Exception and the batcher stops. Before: the queued
    requests and every later /recommend hung (the client's timeout ended them), and /healthz
    said ok. Now each is a 503 naming the failure at once, and /healthz a 503 too."""
    path, model = models["implicit-user"]
    marker = model.user_ids[5].item()
    server = failing_server(path, marker, "Planted", delay=1.0)
    answers = {}

    def ask(user) -> None:
        answers[user] = server.call("/recommend" + query(user=user, n=3))
    try:
        first = threading.Thread(target=ask, args=(marker,))
        first.start()
        time.sleep(0.3)                       # the marker's batch is being scored
        others = [threading.Thread(target=ask, args=(user,))
                  for user in model.user_ids[6:12].tolist()]
        start = time.monotonic()
        for thread in others:
            thread.start()
        for thread in [first, *others]:
            thread.join(20)
        assert time.monotonic() - start < 10 and len(answers) == 7, answers
        for status, got in answers.values():
            assert status == 503 and "Planted: planted" in got["error"], got
            assert "restart the server" in got["error"]
        start = time.monotonic()
        status, got = server.call("/recommend", {"users": model.user_ids[:2].tolist()})
        assert status == 503 and "Planted: planted" in got["error"]
        assert time.monotonic() - start < 2
        status, health = server.call("/healthz")
        assert status == 503 and health["status"] == "failing"
        assert "Planted: planted" in health["error"]
        assert "the batcher stopped" in server.logged()
    finally:
        assert server.stop() == 0, server.logged()


@pytest.mark.parametrize("value, shown", [
    ("x" * 78, '"' + "x" * 78 + '"'),                                  # 80 characters: whole
    ("x" * 79, '"' + "x" * 79 + '... (81 characters)'),                # 81: cut at 80
    (list(range(40)), json.dumps(list(range(40)))[:80] + "... (150 characters)"),
    (3, "3"), ("3", '"3"')])
def test_a_wrong_value_is_shown_as_json_cut_to_its_first_80_characters(value, shown):
    assert app_shown(value) == shown
