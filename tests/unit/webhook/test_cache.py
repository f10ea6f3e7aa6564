"""The list+watch cache, against a scripted fake API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from admission.core.review.envelope import ObjectRef
from admission.kube import kinds
from admission.kube.client import KubeApiError
from admission.kube.paths import Resource
from admission.kube.reflector import Projection, Reflector
from admission.webhook.cache import WEBHOOK_RESOURCES, WebhookCache

NAMESPACES, LOCAL_QUEUES, DEVICE_CLASSES = kinds.NAMESPACES, kinds.LOCAL_QUEUES, kinds.DEVICE_CLASSES


def only(*wanted: Resource) -> tuple[tuple[Resource, Projection], ...]:
    return tuple((resource, project) for resource, project in WEBHOOK_RESOURCES if resource in wanted)


class FakeApi:
    """Lists from `objects`; watches replay `events` then end; GETs count in `gets`."""

    def __init__(self) -> None:
        self.objects: dict[str, list[dict[str, Any]]] = {}
        self.events: dict[str, list[dict[str, Any]]] = {}
        self.singles: dict[str, dict[str, Any]] = {}
        self.gets: list[str] = []
        self.missing_lists: set[str] = set()
        self.watch_started = asyncio.Event()

    async def get(self, path: str, params: Any = None) -> dict[str, Any]:
        self.gets.append(path)
        if path in self.missing_lists:
            raise KubeApiError("GET", path, 404, "the server could not find the requested resource")
        if path in self.objects:
            return {"metadata": {"resourceVersion": "1"}, "items": self.objects[path]}
        if path in self.singles:
            return self.singles[path]
        raise KubeApiError("GET", path, 404, "not found")

    async def watch(self, path: str, version: str, timeout_seconds: int = 300) -> AsyncIterator[dict[str, Any]]:
        self.watch_started.set()
        for event in self.events.pop(path, []):
            yield event
        await asyncio.sleep(3600)


def ns(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels, "managedFields": [{"big": "x"}]}}


def lq(namespace: str, name: str, cq: str) -> dict[str, Any]:
    return {"apiVersion": "draq.io/v1alpha1", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": cq}, "status": {"x": 1}}


def test_list_then_watch_keeps_the_store_current() -> None:
    async def go() -> None:
        api = FakeApi()
        api.objects[NAMESPACES.list_path()] = [ns("a", team="x"), ns("b")]
        api.events[NAMESPACES.list_path()] = [
            {"type": "MODIFIED", "object": ns("b", **{"draq.io/managed": "true"})},
            {"type": "DELETED", "object": ns("a")},
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}},
            {"type": "ADDED", "object": ns("c")},
        ]
        cache = WebhookCache(api, only(NAMESPACES))  # type: ignore[arg-type]
        await cache.start(timeout=5)
        await api.watch_started.wait()
        await asyncio.sleep(0.05)
        assert cache.namespace_labels("a") is None
        assert cache.namespace_labels("b") == {"draq.io/managed": "true"}
        assert cache.namespace_labels("c") == {}
        assert "managedFields" not in cache.reflectors["Namespace"].store[("", "b")]["metadata"]
        await cache.stop()

    asyncio.run(go())


def test_list_items_without_kind_are_stored_typed() -> None:
    # The API server omits apiVersion and kind on the items of a list; parsers of cached objects need them.
    async def go() -> None:
        api = FakeApi()
        api.objects[DEVICE_CLASSES.list_path()] = [{"metadata": {"name": "gpu"}, "spec": {"selectors": []}}]
        cache = WebhookCache(api, only(DEVICE_CLASSES))  # type: ignore[arg-type]
        await cache.start(timeout=5)
        stored = cache.device_class("gpu")
        assert stored is not None
        assert (stored["apiVersion"], stored["kind"]) == ("resource.k8s.io/v1", "DeviceClass")
        await cache.stop()

    asyncio.run(go())


def test_absent_crd_is_empty_and_synced() -> None:
    async def go() -> None:
        api = FakeApi()
        api.missing_lists.add(LOCAL_QUEUES.list_path())
        reflector = Reflector(api, LOCAL_QUEUES, only(LOCAL_QUEUES)[0][1], retry_absent_after=0.01)  # type: ignore[arg-type]
        task = asyncio.create_task(reflector.run())
        await asyncio.wait_for(reflector.synced.wait(), 5)
        assert reflector.store == {}
        api.missing_lists.clear()
        api.objects[LOCAL_QUEUES.list_path()] = [lq("team", "gpu", "cq")]
        await asyncio.sleep(0.1)  # retried: the CRD is there now
        assert reflector.store[("team", "gpu")]["spec"] == {"clusterQueue": "cq"}
        assert reflector.store[("team", "gpu")]["status"] == {}  # only status.pendingGroups is kept
        task.cancel()

    asyncio.run(go())


def test_fetch_serves_one_decision_and_never_writes_the_shared_cache() -> None:
    async def go() -> None:
        api = FakeApi()
        api.objects[LOCAL_QUEUES.list_path()] = []
        cache = WebhookCache(api, only(LOCAL_QUEUES), miss_memory=60)  # type: ignore[arg-type]
        await cache.start(timeout=5)
        path = "/apis/draq.io/v1alpha1/namespaces/team/localqueues/gpu"
        api.singles[path] = lq("team", "gpu", "cq")
        view = await cache.fetch((ObjectRef("LocalQueue", "team", "gpu"),))
        assert view is not None and view.local_queue("team", "gpu") is not None
        assert cache.local_queue("team", "gpu") is None  # only the watch writes the shared stores
        missing = ObjectRef("LocalQueue", "team", "nope")
        assert await cache.fetch((missing,)) is None
        assert await cache.fetch((missing,)) is None
        assert api.gets.count("/apis/draq.io/v1alpha1/namespaces/team/localqueues/nope") == 1
        assert await cache.fetch((ObjectRef("Unknown", "", "x"),)) is None
        await cache.stop()

    asyncio.run(go())


def test_fetch_refuses_names_that_are_not_kubernetes_names() -> None:
    # A forged review's namespace such as "team-a/configmaps/victim" must never address another resource.
    async def go() -> None:
        api = FakeApi()
        api.objects[NAMESPACES.list_path()] = []
        cache = WebhookCache(api, only(NAMESPACES))  # type: ignore[arg-type]
        await cache.start(timeout=5)
        api.singles["/api/v1/namespaces/team-a/configmaps/victim"] = {"metadata": {"name": "victim"}}
        for name in ("team-a/configmaps/victim", "..", "Team", "a" * 64, "x%2Fy"):
            assert await cache.fetch((ObjectRef("Namespace", "", name),)) is None
        assert api.gets == [NAMESPACES.list_path()]
        await cache.stop()

    asyncio.run(go())


def test_fetch_ignores_an_answer_about_another_object() -> None:
    async def go() -> None:
        api = FakeApi()
        api.objects[NAMESPACES.list_path()] = []
        cache = WebhookCache(api, only(NAMESPACES))  # type: ignore[arg-type]
        await cache.start(timeout=5)
        api.singles["/api/v1/namespaces/victim"] = {"metadata": {"name": "other", "labels": {}}}
        assert await cache.fetch((ObjectRef("Namespace", "", "victim"),)) is None
        await cache.stop()

    asyncio.run(go())


def test_object_paths() -> None:
    assert LOCAL_QUEUES.object_path("t", "q") == "/apis/draq.io/v1alpha1/namespaces/t/localqueues/q"
    assert NAMESPACES.object_path(None, "t") == "/api/v1/namespaces/t"


class SecretApi:
    """Secrets by path; `create` refuses a name that exists (409), as the API server does."""

    def __init__(self) -> None:
        self.secrets: dict[str, dict[str, Any]] = {}
        self.creates = 0

    async def get(self, path: str, params: Any = None) -> dict[str, Any]:
        if path not in self.secrets:
            raise KubeApiError("GET", path, 404, "not found")
        return self.secrets[path]

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.creates += 1
        full = f"{path}/{body['metadata']['name']}"
        if full in self.secrets:
            raise KubeApiError("POST", path, 409, "already exists")
        self.secrets[full] = body
        return body


def test_replicas_share_one_ca_from_the_secret() -> None:
    from admission.webhook.rotation import SecretCA

    async def go() -> None:
        api = SecretApi()
        first = await SecretCA(api, "draq-system").load_or_create()  # type: ignore[arg-type]
        second = await SecretCA(api, "draq-system").load_or_create()  # type: ignore[arg-type]
        assert first == second and api.creates == 1

        # Two replicas starting together: this one's GET came before the other's create, so its own
        # create is refused (409) and it reads the winner's CA.
        racing = SecretApi()
        winner = await SecretCA(racing, "draq-system").load_or_create()  # type: ignore[arg-type]
        stale = [True]
        original_get = racing.get

        async def get_before_the_other_replica(path: str, params: Any = None) -> dict[str, Any]:
            if stale.pop() if stale else False:
                raise KubeApiError("GET", path, 404, "not found")
            return await original_get(path, params)

        racing.get = get_before_the_other_replica  # type: ignore[method-assign]
        loser = await SecretCA(racing, "draq-system").load_or_create()  # type: ignore[arg-type]
        assert loser == winner and racing.creates == 2

    asyncio.run(go())


def test_a_damaged_ca_secret_says_how_to_recover() -> None:
    import pytest

    from admission.core.errors import DraqError
    from admission.webhook.rotation import SecretCA

    api = SecretApi()
    api.secrets["/api/v1/namespaces/draq-system/secrets/draq-webhook-ca"] = {"data": {"ca.crt": "eA=="}}
    with pytest.raises(DraqError, match="delete it to make a new CA"):
        asyncio.run(SecretCA(api, "draq-system").load_or_create())  # type: ignore[arg-type]


def test_an_unreachable_api_server_is_a_clear_error() -> None:
    import pytest

    from admission.core.errors import DraqError

    class Down:
        async def get(self, path: str, params: Any = None) -> dict[str, Any]:
            raise OSError("connection refused")

    async def go() -> None:
        with pytest.raises(DraqError, match="could not list LocalQueue from the API server within 0s"):
            await WebhookCache(Down(), only(LOCAL_QUEUES)).start(timeout=0.2)  # type: ignore[arg-type]

    asyncio.run(go())


def test_the_resources_both_caches_read_are_written_once() -> None:
    """`admission.kube.watches.SHARED`: the operator keeps them whole, the webhook their metadata and spec."""
    from admission.kube.watches import SHARED
    from admission.operator.cache import OPERATOR_RESOURCES

    operator = {resource.kind for resource, _ in OPERATOR_RESOURCES}
    webhook = {resource.kind for resource, _ in WEBHOOK_RESOURCES}
    # PodGroups: the operator keeps them whole, the webhook their queue and phase (the cap on pending groups).
    assert operator & webhook == {resource.kind for resource in SHARED} | {"PodGroup"}
    assert webhook == operator & webhook  # the owners' watches are added per enabled integration
    queue = {"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue", "status": {"pending": 1},
             "metadata": {"name": "q", "managedFields": [{}], "labels": {"a": "b"}}, "spec": {"cohort": "c"}}
    [kept_whole] = [project(queue) for resource, project in OPERATOR_RESOURCES if resource.kind == "ClusterQueue"]
    [kept_spec] = [project(queue) for resource, project in WEBHOOK_RESOURCES if resource.kind == "ClusterQueue"]
    assert kept_whole["status"] == {"pending": 1} and "managedFields" not in kept_whole["metadata"]
    assert kept_spec == {"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue",
                         "metadata": {"name": "q", "labels": {"a": "b"}}, "spec": {"cohort": "c"}}


def test_pending_groups_are_the_larger_of_the_queue_status_and_the_pending_podgroups() -> None:
    [(_, project_group)] = [w for w in WEBHOOK_RESOURCES if w[0].kind == "PodGroup"]
    [(_, project_queue)] = [w for w in WEBHOOK_RESOURCES if w[0].kind == "LocalQueue"]
    cache = WebhookCache(FakeApi())  # type: ignore[arg-type]

    def group(name: str, phase: str | None, queue: str = "gpu") -> dict[str, Any]:
        status = {"phase": phase} if phase else {}
        return project_group({"metadata": {"name": name, "namespace": "team", "uid": name},
                              "spec": {"queue": queue, "minMember": 1}, "status": status})

    groups = [group("a", None), group("b", "Evicted"), group("c", "Admitted"), group("d", "Pending", "other")]
    cache.reflectors["PodGroup"].store.update({("team", g["metadata"]["name"]): g for g in groups})
    queue = {**lq("team", "gpu", "cq"), "status": {"pendingGroups": 1, "admittedGroups": 4}}
    cache.reflectors["LocalQueue"].store[("team", "gpu")] = project_queue(queue)
    assert cache.pending_groups("team", "gpu") == 2
    cache.reflectors["LocalQueue"].store[("team", "gpu")]["status"]["pendingGroups"] = 7
    assert cache.pending_groups("team", "gpu") == 7
    assert cache.pod_group("team", "c") == {"metadata": {"name": "c", "namespace": "team", "uid": "c"},
                                            "spec": {"queue": "gpu"}, "status": {"phase": "Admitted"}}


def test_an_owner_is_read_live_once_and_a_failure_gives_no_owner() -> None:
    async def go() -> None:
        api = FakeApi()
        ds = {"metadata": {"name": "agent", "namespace": "team", "uid": "u1", "labels": {}}, "spec": {"big": 1}}
        api.singles["/apis/apps/v1/namespaces/team/daemonsets/agent"] = ds
        cache = WebhookCache(api)  # type: ignore[arg-type]
        ref = ObjectRef("DaemonSet", "team", "agent")
        view = await cache.fetch((ref,))
        assert view is not None
        assert view.owner("DaemonSet", "team", "agent") == {"metadata": {"name": "agent", "namespace": "team",
                                                                         "uid": "u1", "labels": {}}}
        assert cache.owner("DaemonSet", "team", "agent") is None  # never enters the shared cache
        assert await cache.fetch((ObjectRef("DaemonSet", "team", "made-up"),)) is None
        assert await cache.fetch((ObjectRef("DaemonSet", "team", "made-up"),)) is None  # remembered as missing
        assert api.gets.count("/apis/apps/v1/namespaces/team/daemonsets/made-up") == 1

    asyncio.run(go())


def test_an_owner_that_does_not_answer_in_time_gives_no_owner(caplog: pytest.LogCaptureFixture) -> None:
    class SlowApi(FakeApi):
        async def get(self, path: str, params: Any = None) -> dict[str, Any]:
            await asyncio.sleep(5)
            return {}

    async def go() -> None:
        cache = WebhookCache(SlowApi(), owner_timeout=0.05)  # type: ignore[arg-type]
        assert await cache.fetch((ObjectRef("DaemonSet", "team", "agent"),)) is None

    asyncio.run(asyncio.wait_for(go(), 2))
    assert "reading owner DaemonSet team/agent" in caplog.text and "the pod gets no exemption" in caplog.text


def test_owner_watches_keep_what_the_owner_chain_and_shapes_read() -> None:
    from admission.core.workloads import KINDS
    from admission.kube.kinds import workload_resources
    from admission.webhook.cache import owner_watches

    owner = [{"apiVersion": "x/v1", "kind": "X", "name": "top", "controller": True}]
    meta = {"name": "o", "namespace": "ns", "labels": {"draq.io/queue": "q"}, "ownerReferences": owner,
            "managedFields": [{}]}
    obj = {"metadata": meta, "spec": {"parallelism": 2, "template": {"spec": {}}, "replicas": 3}}
    kept = {resource.kind: project(obj) for resource, project in owner_watches(workload_resources(KINDS))}
    assert kept["Job"] == {"metadata": {k: meta[k] for k in ("name", "namespace", "labels", "ownerReferences")},
                           "spec": {"parallelism": 2}}
    assert "spec" not in kept["ReplicaSet"] and kept["ReplicaSet"]["metadata"]["ownerReferences"] == owner
    assert kept["JobSet"]["spec"] == obj["spec"]
