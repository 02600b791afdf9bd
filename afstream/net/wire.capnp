# afstream wire format: every frame between workers, the backup server and the controller is one Envelope.
# Generated C++: #include "afstream/net/wire.capnp.h" (namespace afs::net::wire). Runtime code does not use
# these types directly; it goes through afstream/net/codec.h, which mirrors wireVersion as afs::net::kWireVersion
# (checked at compile time against WIRE_VERSION generated from this file).
#
# Evolution rules: add fields only with new ordinals at the end; never renumber or change a field's type.
# Bump wireVersion for any change a reader of the previous version would misinterpret; decoders reject
# frames whose version differs from theirs.
@0x8f9c61cf0b7a1162;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("afs::net::wire");

const wireVersion :UInt16 = 1;

struct Envelope {
  version @0 :UInt16;   # must equal wireVersion
  sender @1 :UInt32;    # worker id of the sender
  epoch @2 :UInt32;     # the sender's incarnation (bumped on every restart)

  union {
    batch @3 :Batch;
    ack @4 :Ack;
    control @5 :Control;
    storeRequest @6 :StoreRequest;  # to the backup server (afstream/runtime/backup_server.h)
    storeReply @7 :StoreReply;      # from the backup server
    workerReport @8 :WorkerReport;  # worker process -> controller (afstream/runtime/process_cluster.h)
    directory @9 :Directory;        # controller -> worker processes
  }
}

# Items on one channel, columnar. Item i has seq = firstSeq + i; keys, values and times have the same length.
struct Batch {
  channel @0 :UInt32;
  firstSeq @1 :UInt64;
  keys @2 :List(UInt64);
  values @3 :List(Int64);
  times @4 :List(Int64);
  endOfStream @5 :Bool;  # punctuation: the channel ends after the last item of this batch
}

# Cumulative acknowledgement: every item with seq <= this one on the channel was received.
# covered: every item with seq <= covered is reflected in a backup the receiver's store has confirmed (its state
# or its item log): what a replayable source must be able to replay from after a failure (0: nothing yet).
struct Ack {
  channel @0 :UInt32;
  seq @1 :UInt64;
  covered @2 :UInt64;
}

# Controller messages. Which fields matter depends on kind (see codec.h, ControlKind).
struct Control {
  kind @0 :Kind;
  worker @1 :UInt32;
  epoch @2 :UInt32;
  seq @3 :UInt64;
  channel @4 :UInt32;

  enum Kind {
    unset @0;          # never sent; a decoder rejects it
    peerRestarted @1;  # worker `worker` restarted as incarnation `epoch`
    resendFrom @2;     # resend items of `channel` starting at `seq`
    stop @3;           # stop (end the job, or the addressed worker)
    heartbeat @4;      # liveness ping/reply
  }
}

# A request to the backup server (the BackupStore interface of afstream/store/backup_store.h over the network).
# The client sends one request at a time per session, with increasing requestIds, and waits for the reply with the
# same requestId; on a timeout it resends the same request (same session and requestId). The server applies a put
# or drop of a session at most once while it runs: the last one applied, received again, is answered again from a
# cache; an older one is dropped. session 0: no such deduplication.
struct StoreRequest {
  requestId @0 :UInt64;
  session @1 :UInt64;
  worker @2 :Int32;  # every operation but stats

  union {
    unset @3 :Void;  # never sent; the server answers badRequest
    putState :group {
      full @4 :Bool;                 # true starts a new chain
      record @5 :Data;
      covered @6 :List(ChannelSeq);  # per input channel, the last sequence number the state reflects
    }
    putItems :group {
      record @7 :Data;
      infos @8 :List(ItemRange);     # which sequence numbers the record holds
    }
    stateChain @9 :Void;
    itemRecords @10 :Void;
    drop @11 :Void;
    stats @12 :Void;
  }
}

struct ChannelSeq {
  channel @0 :UInt32;
  seq @1 :UInt64;
}

struct ItemRange {
  channel @0 :UInt32;
  firstSeq @1 :UInt64;
  lastSeq @2 :UInt64;
}

# The backup server's answer to the StoreRequest with the same requestId.
struct StoreReply {
  requestId @0 :UInt64;

  union {
    unset @1 :Void;            # never sent; a decoder rejects it
    ok @2 :Void;               # putState, putItems, drop
    records @3 :List(Data);    # stateChain, itemRecords (in order)
    stats @4 :StoreStats;      # stats
    error @5 :StoreError;      # any operation
  }
}

struct StoreStats {
  stateBackups @0 :UInt64;
  itemBackups @1 :UInt64;
  bytesWritten @2 :UInt64;
  bytesStored @3 :UInt64;
}

struct StoreError {
  kind @0 :Kind;
  message @1 :Text;

  enum Kind {
    unset @0;          # never sent; a decoder rejects it
    corruptRecord @1;  # a record failed its checksum (the store's FormatError); it was not returned
    storeFailure @2;   # the store could not do it (e.g. a RocksDB error)
    badRequest @3;     # the request could not be decoded or is not a request
  }
}

# What a worker process tells its controller: it is up (sockets bound, state restored), how it is doing (sent every
# heartbeat interval; a worker silent for the heartbeat timeout is presumed dead), and that it finished for good.
struct WorkerReport {
  kind @0 :Kind;
  status @1 :WorkerStatus;
  finalState @2 :Data;                 # finished: a sink's full operator snapshot (sealed), else empty
  recovery @3 :RecoveryReport;         # hello and status of a recovered incarnation: the failure it recovered from

  enum Kind {
    unset @0;     # never sent; a decoder rejects it
    hello @1;
    status @2;
    finished @3;
  }
}

struct WorkerStatus {
  itemsIn @0 :UInt64;          # processed (sources: produced)
  itemsOut @1 :UInt64;
  stateBackups @2 :UInt64;
  itemBackups @3 :UInt64;
  backupBytes @4 :UInt64;
  duplicatesDropped @5 :UInt64;
  gaps @6 :UInt64;
  badMessages @7 :UInt64;
  unbacked @8 :UInt64;
  unacked @9 :UInt64;
  divergence @10 :Float64;
  sourceOffset @11 :UInt64;    # sources: furthest position produced
}

struct RecoveryReport {
  failureCount @0 :UInt32;     # 0: not a recovered incarnation
  theta @1 :Float64;
  l @2 :UInt64;
  gamma @3 :UInt64;
  alpha @4 :Float64;
  restoreMs @5 :Float64;
  recoveredMs @6 :Float64;     # process start to recovered (the controller adds kill to start)
  replayedItems @7 :UInt64;
  missingItems @8 :Int64;      # -1: not measured
  done @9 :Bool;               # the recovery is complete (replayed, compensated)
  replayMs @10 :Float64;       # restored to every replayed item processed
  firstItemMs @11 :Float64 = -1;  # process start to the first item processed from upstream after the recovery
                                  # (sources: produced); -1: none (the input had ended)
}

# The controller's view of every worker, broadcast whenever it changes (and periodically).
struct Directory {
  peers @0 :List(PeerState);
}

struct PeerState {
  worker @0 :UInt32;
  epoch @1 :UInt32;
  up @2 :Bool;
  finished @3 :Bool;
}
