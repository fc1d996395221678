"""The push notification config methods of ``A2AClient`` (a server with pushNotifications)."""
from __future__ import annotations

import logging
from collections.abc import Iterator

from murmur_wsgi.client.errors import ProtocolError, kind_of

logger = logging.getLogger(__name__)

MAX_PAGES = 1000                 # the pages push_list() follows; the tasks command's default


class PushConfigs:
    """CreateTaskPushNotificationConfig and its Get, List and Delete, over ``self.call``."""

    def push_create(self, task_id: str, url: str, *, token: str | None = None,
                    config_id: str | None = None) -> dict:
        """CreateTaskPushNotificationConfig: the saved config (its key in this answer only)."""
        params = {"taskId": task_id, "url": url}
        if token is not None:
            params["token"] = token
        if config_id is not None:
            params["id"] = config_id
        method = "CreateTaskPushNotificationConfig"
        return self._object(method, self.call(method, params))

    def push_get(self, task_id: str, config_id: str) -> dict:
        """GetTaskPushNotificationConfig."""
        method = "GetTaskPushNotificationConfig"
        return self._object(method, self.call(method, {"taskId": task_id, "id": config_id}))

    def push_pages(self, task_id: str, *, max_pages: int | None = None) -> Iterator[dict]:
        """ListTaskPushNotificationConfigs page after page (``{configs, nextPageToken}``),
        lazily, at most ``max_pages`` (None: to the last): the last page yielded names a
        ``nextPageToken`` when the pages were cut short (as ``list_pages``)."""
        method = "ListTaskPushNotificationConfigs"

        def fetch(token: str):
            return self.call(method, {"taskId": task_id, **({"pageToken": token} if token
                                                             else {})})
        return self._pages(method, "", fetch, max_pages)

    def push_list(self, task_id: str, *, max_pages: int = MAX_PAGES) -> list[dict]:
        """ListTaskPushNotificationConfigs: every config of the task, page after page;
        a next page named past ``max_pages`` is a ProtocolError."""
        configs, page = [], {}
        for page in self.push_pages(task_id, max_pages=max_pages):
            configs.extend(page_configs(page))
        self.push_pages_ended(page, max_pages)
        return configs

    def push_pages_ended(self, last: dict, max_pages: int) -> None:
        """A ProtocolError if ``last``, the last of ``max_pages`` pages read, names another."""
        if last.get("nextPageToken"):
            raise ProtocolError(f"{self.noun} at {self.url} answered "
                                f"ListTaskPushNotificationConfigs with more than {max_pages} "
                                "pages: not followed further", url=self.url)

    def push_delete(self, task_id: str, config_id: str) -> None:
        """DeleteTaskPushNotificationConfig, whose result is ``{}`` (google.protobuf.Empty),
        or ``null``, as servers whose result is void answer it: any other is a
        ProtocolError, which says the config may be left."""
        method = "DeleteTaskPushNotificationConfig"
        result = self.call(method, {"taskId": task_id, "id": config_id})
        if result is not None and result != {}:
            raise ProtocolError(f"{self.noun} at {self.url} answered {method} with "
                                f"{kind_of(result)}, not {{}} (the empty result): config "
                                f"{config_id[:80]} of task {task_id[:80]} may not be deleted",
                                url=self.url)


def page_configs(page: dict) -> list[dict]:
    """The configs of a ListTaskPushNotificationConfigs page (entries that are not objects
    left out)."""
    found = page.get("configs")
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []
