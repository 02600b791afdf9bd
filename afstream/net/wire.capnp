# afstream wire format: every frame between workers, the backup server and the controller is one Envelope.
# Generated C++: #include "afstream/net/wire.capnp.h" (namespace afs::net::wire). Runtime code does not use
# these types directly; it goes through afstream/net/codec.h, which mirrors wireVersion as afs::net::kWireVersion
# (checked at compile time against WIRE_VERSION generated from this file).
#
# Evolution rules: add fields only with new ordinals at the end; never renumber or change a field's type.
# Bump wireVersion for any change a reader of the previous version would misinterpret; decoders reject
# frames whose version differs from theirs.
#
# Version 2 (jobs across hosts): workers announce the endpoints they bound (WorkerReport.dataEndpoint/ackEndpoint)
# and the controller's Directory carries them (PeerState); a worker started by hand registers (WorkerReport kind
# register) and gets its Assignment. A version-1 worker would connect to the endpoints of its ipc:// prefix scheme
# instead of the announced ones, so version 1 and 2 do not talk.
#
# Still version 2, with fields added for CURVE on tcp (afstream/net/curve.h): the public key each worker incarnation's
# sockets serve with (WorkerReport.curveKey in the hello, PeerState.curveKey in the Directory), the backup server's
# (Assignment.storeKey), and the connections a worker refused (WorkerStatus.unauthorizedConnections). A reader
# without them sees empty keys and zeros, which is what a job without CURVE sends.
#
# Still version 2, with Envelope.feedback added (the upstream feedback side channel of parameter servers,
# afstream/core/operator.h Emitter::feed_back): soft state, lossy by design. Only jobs whose operators feed back send
# it; a worker built before it would count such a frame as a bad message and drop it, which the channel tolerates.
#
# Version 3 (local recovery, afstream/store/local_recovery_store.h): StoreRequest.held, putState.digest and a
# putState whose record is in the client's local copy (inCopy, copyOffset, copySize), with the error kind
# noLocalCopy. A version-2 server would store such a put's empty `record` as the chain's record, so 2 and 3 do not
# talk.
#
# Still version 3, with RecoveryReport.caughtUpMs, repeatedItems, lostItems and lostOutputs (a worker process's
# progress page, afstream/runtime/progress_page.h): a reader without them reads -1, "not known", and 0, which is what
# they were.
@0x8f9c61cf0b7a1162;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("afs::net::wire");

const wireVersion :UInt16 = 3;

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
    assignment @10 :Assignment;     # controller -> a worker that registered (WorkerReport kind register)
    feedback @11 :FeedbackBatch;    # worker -> its upstream workers (Emitter::feed_back), on their ack sockets
  }
}

# Feedback items, columnar, sent by a worker to the workers upstream of it: no channel, no sequence numbers, never
# acknowledged or backed up (soft state). keys, values and times have the same length.
struct FeedbackBatch {
  keys @0 :List(UInt64);
  values @1 :List(Int64);
  times @2 :List(Int64);
}

# Items on one channel, columnar. Item i has seq = firstSeq + i; keys, values and times have the same length.
struct Batch {
  channel @0 :UInt32;
  firstSeq @1 :UInt64;
  keys @2 :List(UInt64);
  values @3 :List(Int64);
  times @4 :List(Int64);
  endOfStream @5 :Bool;  # punctuation: the channel ends after the last item of this batch
  roots @6 :List(UInt64);  # ack mode: the root (source tuple) id of each item's tree; empty in other modes
  emittedNs @7 :Int64;     # when its oldest item was emitted (steady clock, ns; 0: unknown): latency is measured
                           # from here to when the receiver processes the batch's last item
}

# Cumulative acknowledgement: every item with seq <= this one on the channel was received.
# covered: every item with seq <= covered is reflected in a backup the receiver's store has confirmed (its state
# or its item log): what a replayable source must be able to replay from after a failure (0: nothing yet).
struct Ack {
  channel @0 :UInt32;
  seq @1 :UInt64;
  covered @2 :UInt64;
  trees @3 :List(UInt64);  # ack mode, to a source (the acker of its trees): pairs (root, xor of edge ids)
}

# Controller messages. Which fields matter depends on kind (see codec.h, ControlKind).
struct Control {
  kind @0 :Kind;
  worker @1 :UInt32;
  epoch @2 :UInt32;
  seq @3 :UInt64;
  channel @4 :UInt32;
  checkpoint @5 :UInt64;  # barrier: the checkpoint's id

  enum Kind {
    unset @0;          # never sent; a decoder rejects it
    peerRestarted @1;  # worker `worker` restarted as incarnation `epoch`
    resendFrom @2;     # resend items of `channel` starting at `seq`
    stop @3;           # stop (end the job, or the addressed worker)
    heartbeat @4;      # liveness ping/reply
    ask @5;            # ask mode: a recovered receiver asks for `channel` again from `seq` (its checkpoint + 1)
    barrier @6;        # checkpoint mode, on the data socket: checkpoint `checkpoint` on `channel` is after item `seq`
  }
}

# A request to the backup server (the BackupStore interface of afstream/store/backup_store.h over the network).
# Its Envelope's epoch is the incarnation of the worker the request is about (0: none given, never fenced): once an
# incarnation has used the store, requests from older ones get staleIncarnation (fencing: a worker replaced while
# still running, e.g. on the far side of a network partition, cannot write into its successor's backups).
# The client sends one request at a time per session, with increasing requestIds, and waits for the reply with the
# same requestId; on a timeout it resends the same request (same session and requestId). The server applies a put
# or drop of a session at most once while it runs: the last one applied, received again, is answered again from a
# cache; an older one is dropped. session 0: no such deduplication.
struct StoreRequest {
  requestId @0 :UInt64;
  session @1 :UInt64;
  worker @2 :Int32;  # every operation but stats
  # stateChain only: the XXH3-64 digests, in chain order, of the records of this worker's chain the client holds
  # itself (a local copy, afstream/store/local_recovery_store.h). When they are the server's chain, it answers with
  # `chain` instead of sending the records. Empty: send the records.
  held @19 :List(UInt64);

  union {
    unset @3 :Void;  # never sent; the server answers badRequest
    putState :group {
      full @4 :Bool;                 # true starts a new chain
      record @5 :Data;
      covered @6 :List(ChannelSeq);  # per input channel, the last sequence number the state reflects
      digest @18 :UInt64;            # XXH3-64 of record as the client computed it (0: none given)
      # The record is not in `record` but in the client's local copy, which the server reads (a server started with
      # a local directory, on the client's host: afstream/store/local_recovery_store.h): `copySize` bytes at byte
      # `copyOffset` of its worker's file there, whose XXH3-64 must be `digest`. A server that cannot read it so
      # answers noLocalCopy, and the client sends the record.
      inCopy @20 :Bool;
      copyOffset @21 :UInt64;
      copySize @22 :UInt64;
    }
    putItems :group {
      record @7 :Data;
      infos @8 :List(ItemRange);     # which sequence numbers the record holds
    }
    stateChain @9 :Void;
    itemRecords @10 :Void;
    drop @11 :Void;
    stats @12 :Void;
    confirmCheckpoint :group {      # checkpoint mode: the worker holds its record for `checkpoint`
      checkpoint @13 :UInt64;
      workers @14 :Int32;           # the job's worker count
      final @17 :Bool;              # the worker finished its stream in this checkpoint
    }
    checkpointStatus @15 :Void;     # checkpoint mode: the latest complete checkpoint and the round
    rejoinCheckpoints @16 :Void;    # checkpoint mode: a restarted worker rejoins (checkpoint_ledger.h)
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
    chain @6 :StoreChain;      # putState: the worker's chain after the put; stateChain with held digests: the
                               # chain is the records the client holds (none sent)
    checkpoints @7 :StoreCheckpoints;  # confirmCheckpoint, checkpointStatus, rejoinCheckpoints
  }
}

struct StoreCheckpoints {
  complete @0 :UInt64;  # the latest checkpoint every worker confirmed (0: none)
  round @1 :UInt32;
}

struct StoreChain {
  generation @0 :UInt64;  # changes when the chain changes other than by an appended delta
  length @1 :UInt64;      # records: the full snapshot and the deltas after it
  fullBytes @2 :UInt64;
  deltaBytes @3 :UInt64;
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
    staleIncarnation @4;  # from an incarnation of the worker older than one that has used the store since
    noLocalCopy @5;       # a putState inCopy the server cannot read from the client's local copy (none, or not that)
  }
}

# What a worker process tells its controller: it is up (sockets bound, state restored), how it is doing (sent every
# heartbeat interval; a worker silent for the heartbeat timeout is presumed dead), and that it finished for good.
struct WorkerReport {
  kind @0 :Kind;
  status @1 :WorkerStatus;
  finalState @2 :Data;                 # finished: a sink's full operator snapshot (sealed), else empty
  recovery @3 :RecoveryReport;         # hello and status of a recovered incarnation: the failure it recovered from
  dataEndpoint @4 :Text;               # hello: where this incarnation receives items (what it bound, e.g. tcp://IP:PORT)
  ackEndpoint @5 :Text;                # hello: where it receives acknowledgements
  curveKey @6 :Text;                   # hello: the CURVE public key its data and ack sockets serve with (Z85; "": none)
  error @7 :Text;                      # failed: the error it stops on
  jobConfig @8 :Text;                  # hello: the job's options in force in this process ("key = value" lines, the
                                       # job's and the run's that shape the job), which its controller checks
                                       # against its own ("": not said)

  enum Kind {
    unset @0;     # never sent; a decoder rejects it
    hello @1;
    status @2;
    finished @3;
    register @4;  # a worker started by hand asks for its incarnation (Envelope.epoch 0); answered by an Assignment
    standby @5;   # a spare process the controller started (Envelope.sender: its standby slot, epoch 0) is ready to
                  # take over a failed worker; answered by an Assignment when one fails
    failed @6;    # it stops on an error (error: what), which a restart would meet again: the run ends with it
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
  unauthorizedConnections @12 :UInt64;  # CURVE: connections refused, the client's key not authorized
  treesReplayed @13 :UInt64;   # ack mode (sources): items replayed after their tree timed out
  latency @14 :List(UInt64);   # batches by latency bucket (afstream/runtime/metrics.h)
  # Checkpoint mode (afstream/runtime/metrics.h, WorkerCounters): this incarnation's checkpoint counters.
  checkpoints @15 :UInt64;
  checkpointsAbandoned @16 :UInt64;
  checkpointMs @17 :Float64;     # sum over completed checkpoints
  checkpointMsMax @18 :Float64;
  checkpointBytes @19 :UInt64;
  alignments @20 :UInt64;
  alignmentMs @21 :Float64;      # sum over alignments
  alignmentMsMax @22 :Float64;
  itemsHeld @23 :UInt64;
  inputPosition @24 :UInt64;   # sum over input channels of the last sequence number processed (WorkerCounters)
  outputsAfterEnd @25 :UInt64; # emitted after the channel's end of stream went out: dropped (WorkerCounters)
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
  residual @11 :Float64;       # what the restored (partial) backup left unwritten
  firstItemMs @12 :Float64 = -1;  # process start to the first item processed from upstream after the recovery
                                  # (sources: produced); -1: none (the input had ended)
  caughtUpMs @13 :Float64 = -1;   # process start to back where the crashed incarnation was (its progress page);
                                  # -1: not (yet) known
  repeatedItems @14 :Int64 = -1;  # items the crashed incarnation had processed that this one processes again
  lostItems @15 :UInt64;          # what the crashed incarnation lost (its progress page, as of its last batch)
  lostOutputs @16 :UInt64;
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
  dataEndpoint @4 :Text;  # where this incarnation receives items, as it announced them (empty until its hello)
  ackEndpoint @5 :Text;   # where it receives acknowledgements
  curveKey @6 :Text;      # the CURVE public key its sockets serve with, as announced (Z85; "": none)
  killed @7 :Bool;        # the incarnation before `epoch` was killed by the failure plan: it dies by SIGKILL
}

# The controller's answer to a registering worker: which incarnation it is, what it needs to know of the failures of
# the earlier ones, the job's options, and where the directory and the backup server are. epoch 0: refused (error
# says why, naming the option).
struct Assignment {
  worker @0 :UInt32;
  epoch @1 :UInt32;
  failures @2 :List(UInt64);  # items the worker had processed at each earlier failure (its size is the count)
  jobArgs @3 :List(Text);     # the job's options, as for `afstream worker`
  directory @4 :Text;         # the controller's directory endpoint (PUB)
  store @5 :Text;             # the backup server's endpoint
  heartbeatMs @6 :UInt32;     # status report interval
  error @7 :Text;
  storeKey @8 :Text;          # the backup server's CURVE public key (Z85; "": CURVE off)
}
