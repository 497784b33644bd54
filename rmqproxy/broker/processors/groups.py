"""Subscription-group admin codes (docs/protocol.md, Subscription groups): UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
(200, mqadmin updateSubGroup), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201: the console and mqadmin
getConsumerConfig read it), DELETE_SUBSCRIPTIONGROUP (207, deleteSubGroup) and the 5.x
GET_SUBSCRIPTIONGROUP_CONFIG (352).
"""

from __future__ import annotations

from codec.bodies import SubscriptionGroupConfig
from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand

from ...net.dispatch import Route
from ..store import MessageStore
from ..subgroups import GroupRefused, SubscriptionGroupTable
from ...core.names import check_group_name


class GroupProcessor:
    def __init__(self, groups: SubscriptionGroupTable, store: MessageStore) -> None:
        self.groups = groups
        self.store = store  # its offsets are opened when it starts

    def routes(self) -> list[Route]:
        """This processor's entries of the dispatch table."""
        return [
            Route(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, self.update),
            Route(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, self.get_all),
            Route(RequestCode.DELETE_SUBSCRIPTIONGROUP, self.delete),
            Route(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, self.get_one),
        ]

    def update(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        """Create or replace the body's group; a config rmqproxy cannot keep as asked is refused
        (SYSTEM_ERROR naming why), never stored and ignored. The reference answers an empty body
        SUCCESS having done nothing; here it is refused too."""
        if not request.body:
            return request.response(ResponseCode.SYSTEM_ERROR, "no SubscriptionGroupConfig in the request body")
        config = SubscriptionGroupConfig.from_json(request.body)
        try:
            self.groups.put(config)
        except GroupRefused as refused:
            return request.response(ResponseCode.SYSTEM_ERROR, str(refused))
        return request.response(ResponseCode.SUCCESS)

    def get_all(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, body=self.groups.wrapper().to_json())

    def delete(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        """Remove the group (SUCCESS whether it existed or not, as the reference), and its offsets
        when asked: ``removeOffset`` from 4.9 tools, ``cleanOffset`` from 5.x ones."""
        problem = check_group_name(header.group_name)
        if problem is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, problem)
        self.groups.delete(header.group_name)
        if header.remove_offset or header.clean_offset:
            self.store.offsets.remove_group(header.group_name)
        return request.response(ResponseCode.SUCCESS)

    def get_one(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        config = self.groups.get(header.group)
        if config is None:
            return request.response(ResponseCode.SYSTEM_ERROR, "No group in this broker")
        return request.response(ResponseCode.SUCCESS, body=config.to_json())
