"""Remote (inter-cluster) export procedures: keys for one move, the
destination's listeners and the source's sending.  See
:mod:`ganeti.backend.remote_transfer`."""

from twisted.logger import Logger

from ganeti import errors
from ganeti import ht
from ganeti.backend import exports
from ganeti.backend import remote_transfer as rt
from ganeti.server.noded.procedure import Arg, procedure

log = Logger()

#: the longest a listener may wait for its data (seconds)
MAX_LISTEN = 7 * 24 * 3600


class RemoteTransferProcedures(object):
    """Keys and disk transfers of moves between clusters."""

    @property
    def _remote_imports(self):
        listeners = self.__dict__.get("_rie_listeners")
        if listeners is None:
            listeners = self.__dict__["_rie_listeners"] = {}
        return listeners

    @procedure(Arg("validity", ht.POS_INT))
    async def x509_cert_create(self, validity):
        """A new key and self-signed certificate for a remote import or
        export, valid ``validity`` seconds; ``[name, certificate PEM]``."""
        now = self.reactor.seconds()
        expired = await self.run_blocking(rt.clean_keys, self.paths, now)
        if expired:
            log.info("Removed expired import/export keys: {names}",
                     names=", ".join(expired))
        name, pem = await self.run_blocking(rt.make_key, self.paths,
                                            validity, now)
        log.info("Made import/export key {name}", name=name)
        return [name, pem]

    @procedure(Arg("name", ht.NESTR))
    async def x509_cert_remove(self, name):
        """Remove an import/export key; False if there is none."""
        return await self.run_blocking(rt.remove_key, self.paths, name)

    @procedure(Arg("key_name", ht.NESTR), Arg("peer_ca", ht.NESTR),
               Arg("host", ht.NESTR), Arg("magic", ht.NESTR),
               Arg("transfer_id", ht.NESTR), Arg("timeout", ht.POS_INT))
    async def remote_import_listen(self, key_name, peer_ca, host, magic,
                                   transfer_id, timeout):
        """Listen on ``host`` (a random port) for one disk's data from the
        holder of certificate ``peer_ca``, sent with ``magic``, into
        transfer file ``transfer_id``; the port."""
        if timeout > MAX_LISTEN:
            raise errors.ParameterError(
                "timeout", "timeout: at most %d seconds, not %d"
                % (MAX_LISTEN, timeout))
        if transfer_id in self._remote_imports:
            raise errors.ParameterError(
                "transfer_id", "transfer_id: %s is listening already"
                % transfer_id)
        path = exports.transfer_path(self.paths, transfer_id)
        peer = rt.load_peer(peer_ca, "peer_ca")
        own = await self.run_blocking(rt.load_key, self.paths, key_name)
        await self.run_blocking(exports.ensure_transfer_dir, self.paths)
        listener = rt.ImportListener(self.reactor, own, peer, host, magic,
                                     path, timeout)
        try:
            port = listener.start()
        except Exception as err:
            raise errors.ExportError("cannot listen on %s: %s" % (host, err))
        self._remote_imports[transfer_id] = listener
        log.info("Listening on {host}:{port} for remote import {tid}",
                 host=host, port=port, tid=transfer_id)
        return port

    @procedure(Arg("transfer_ids", ht.list_of(ht.NESTR)))
    def remote_import_status(self, transfer_ids):
        """``{transfer id: {"port", "done", "size", "sha256", "error",
        "last_attempt"}}``; an unknown id (this daemon restarted, or the
        import was ended) is ``null``."""
        result = {}
        for tid in transfer_ids:
            listener = self._remote_imports.get(tid)
            result[tid] = None if listener is None else listener.status()
        return result

    @procedure(Arg("transfer_id", ht.NESTR))
    async def remote_import_end(self, transfer_id):
        """Stop listening for a remote import (done or not) and forget
        it; the transfer file stays if it was received."""
        listener = self._remote_imports.pop(transfer_id, None)
        if listener is None:
            return False
        await listener.stop()
        if not listener.finished:
            await self.run_blocking(exports.remove_transfer, self.paths,
                                    transfer_id)
        return True

    @procedure(Arg("key_name", ht.NESTR), Arg("peer_ca", ht.NESTR),
               Arg("host", ht.NESTR), Arg("port", ht.POS_INT),
               Arg("magic", ht.NESTR), Arg("transfer_id", ht.NESTR),
               Arg("connect_timeout", ht.POS_INT, 60))
    async def remote_export_send(self, key_name, peer_ca, host, port, magic,
                                 transfer_id, connect_timeout):
        """Send transfer file ``transfer_id`` to a remote import's
        listener, presenting key ``key_name`` and accepting only a server
        with certificate ``peer_ca``; ``{"size", "sha256"}``."""
        path = exports.transfer_path(self.paths, transfer_id)
        peer = rt.load_peer(peer_ca, "peer_ca")
        own = await self.run_blocking(rt.load_key, self.paths, key_name)
        result = await rt.send_file(self.reactor, own, peer, host, port,
                                    magic, path, connect_timeout)
        log.info("Sent transfer {tid} to {host}:{port}: {size} bytes",
                 tid=transfer_id, host=host, port=port, size=result["size"])
        return result
