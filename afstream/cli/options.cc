#include "afstream/cli/options.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

#include "afstream/core/duration.h"
#include "afstream/core/errors.h"
#include "afstream/core/number_text.h"
#include "afstream/net/endpoint.h"

namespace po = boost::program_options;

namespace afs::cli {

namespace {
// How config.ini notes a value a job file cannot hold; parse_run refuses such a file unless the command line gives it.
constexpr const char* kUnheldNote = "(give it on the command line: a job file cannot hold it)";
// How config.ini says where its run was started (run_config_file): a relative path read back from it is taken from
// there (read_job_file).
constexpr std::string_view kStartedIn = "# started in: ";

// The directory a job file's first line names as its run's start (kStartedIn), if it does.
std::optional<std::filesystem::path> started_in(const std::string& text) {
  if (!text.starts_with(kStartedIn)) return std::nullopt;
  const auto end = text.find('\n');
  return std::filesystem::path(text.substr(kStartedIn.size(), end - kStartedIn.size()));
}
}  // namespace

std::string run_config_file(const std::string& effective) {
  std::error_code ec;
  const auto cwd = std::filesystem::current_path(ec).string();
  if (ec || cwd.find('\n') != std::string::npos) return effective;  // relative paths then read from the reader's
  return std::string(kStartedIn) + cwd + "\n" + effective;
}

namespace {
// Primary name -> alias (the paper's letters). Declared once here; both spellings are accepted.
struct Alias {
  const char* primary;
  const char* alias;
};
constexpr Alias kAliases[] = {
    {"ft.state-divergence-max", "ft.theta"},
    {"ft.unbacked-items-max", "ft.l"},
    {"ft.unacked-items-max", "ft.gamma"},
};

bool is_unsigned_option(const po::value_semantic* s) {
  return dynamic_cast<const po::typed_value<unsigned long>*>(s) != nullptr ||
         dynamic_cast<const po::typed_value<unsigned long long>*>(s) != nullptr ||
         dynamic_cast<const po::typed_value<unsigned int>*>(s) != nullptr;
}

// A whole number given to an unsigned option, as the text Boost reads: "1e6" becomes "1000000". Boost alone read
// "-5" as 2^64 - 5 and refused "1e6"; operators read many counts as int64 (Params::get_int), so the limit is
// 2^63 - 1 for every unsigned option.
std::string whole_number_text(const std::string& key, const std::string& token) {
  const auto refuse = [&](const char* why) {
    return ConfigError(key + ": expected a whole number in [0, 2^63 - 1]" + why + ", got '" + token + "'");
  };
  const auto first = token.find_first_not_of(" \t");
  const auto last = token.find_last_not_of(" \t");
  if (first == std::string::npos) throw refuse("");
  std::string t = token.substr(first, last - first + 1);
  if (t[0] == '-') throw refuse("");
  if (t[0] == '+') t.erase(0, 1);
  if (t.empty()) throw refuse("");
  std::uint64_t u = 0;
  if (const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), u);
      ec == std::errc() && end == t.data() + t.size()) {
    if (u > static_cast<std::uint64_t>(INT64_MAX)) throw refuse("");
    return t;
  }
  double d = 0;
  if (const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), d);
      ec != std::errc() || end != t.data() + t.size() || !std::isfinite(d)) {
    throw refuse("");
  }
  if (d != std::floor(d)) throw refuse(" (not a fraction)");
  if (d >= 0x1p63) throw refuse("");
  return exact_text(static_cast<std::uint64_t>(d));
}

bool is_signed_option(const po::value_semantic* s) {
  return dynamic_cast<const po::typed_value<int>*>(s) != nullptr ||
         dynamic_cast<const po::typed_value<long>*>(s) != nullptr ||
         dynamic_cast<const po::typed_value<long long>*>(s) != nullptr;
}

// The same for a signed option (--fail.count, --hh.parallelism, the *-ms options): "1e3" becomes "1000", and a value
// that is no whole number is named with its option (Boost refused "1e3" as "the argument ('1e3') for option
// '--fail.count' is invalid", while the unsigned counts took it). Boost then checks the type's range.
std::string signed_whole_number_text(const std::string& key, const std::string& token, bool is_int) {
  const auto in_range = [&](std::int64_t v) {
    if (is_int && (v < INT_MIN || v > INT_MAX)) {
      throw ConfigError(key + ": expected a whole number in [-2^31, 2^31 - 1], got '" + token + "'");
    }
    return std::to_string(v);
  };
  const auto first = token.find_first_not_of(" \t");
  const auto last = token.find_last_not_of(" \t");
  std::string t = first == std::string::npos ? std::string() : token.substr(first, last - first + 1);
  if (!t.empty() && t[0] == '+') t.erase(0, 1);
  std::int64_t i = 0;
  if (const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), i);
      ec == std::errc() && end == t.data() + t.size() && !t.empty()) {
    return in_range(i);
  }
  double d = 0;
  if (const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), d);
      ec == std::errc() && end == t.data() + t.size() && !t.empty() && std::isfinite(d) && d == std::floor(d) &&
      std::fabs(d) < 0x1p63) {
    return in_range(static_cast<std::int64_t>(d));
  }
  throw ConfigError(key + ": expected a whole number, got '" + token + "'");
}

// po::store, after checking the value of every whole-number option (whole_number_text, signed_whole_number_text) on
// the command line or in a job file.
void store_checked(po::parsed_options&& parsed, po::variables_map& vm) {
  for (auto& o : parsed.options) {
    if (o.unregistered || parsed.description == nullptr) continue;
    const auto* d = parsed.description->find_nothrow(o.string_key, false);
    if (d == nullptr) continue;
    if (is_unsigned_option(d->semantic().get())) {
      for (auto& token : o.value) token = whole_number_text(o.string_key, token);
    } else if (is_signed_option(d->semantic().get())) {
      const bool is_int = dynamic_cast<const po::typed_value<int>*>(d->semantic().get()) != nullptr;
      for (auto& token : o.value) token = signed_whole_number_text(o.string_key, token, is_int);
    }
  }
  po::store(parsed, vm);
}

// The command line's options, after a check that every word is an option or an option's value: Boost took a stray
// word (`afstream run stray --job grep`) for an option of no name, "ambiguous" among all of them, and listed them.
po::parsed_options parse_command_line(int argc, const char* const* argv, const po::options_description& desc) {
  po::options_description with_strays;
  with_strays.add(desc).add_options()("afs-stray-argument", po::value<std::vector<std::string>>());
  po::positional_options_description strays;
  strays.add("afs-stray-argument", -1);
  // Without guessing, so that an abbreviation (`--a`) cannot name the hidden option; anything this parse refuses is
  // left to the real one below, which says what it says of it.
  const int exact = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  try {
    const auto parsed = po::command_line_parser(argc, argv).options(with_strays).positional(strays).style(exact).run();
    for (const auto& o : parsed.options) {
      if (o.string_key == "afs-stray-argument") {
        throw ConfigError("unexpected argument '" + (o.value.empty() ? std::string() : o.value.front()) +
                          "': options are written --name value (or --name=value); --help lists them");
      }
    }
  } catch (const po::error&) {
  }
  return po::command_line_parser(argc, argv).options(desc).run();
}

// A job (or options) file's options, each with the line it is on. Boost names neither the file nor the line of what
// it refuses (`unrecognised option 'hh.bogus'`, "an invalid line 'items'"), and a run's config.ini has some seventy
// lines: the key is looked up here first, as Boost reads the file ('#' to the end of a line a comment, `[SECTION]` a
// prefix of the keys after it), so that an unknown key, a line without '=' or a bad value names file and line.
struct FileOptions {
  po::parsed_options parsed;
  std::vector<int> lines;  // parsed.options[i] is on line lines[i]
};

std::string file_line(const std::string& path, int line) {
  return "config: '" + path + "' line " + std::to_string(line) + ": ";
}

FileOptions parse_options_file(const std::string& text, const std::string& path, const po::options_description& desc) {
  const auto trim = [](const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r\n");
    return b == std::string::npos ? std::string() : s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
  };
  std::vector<int> lines;
  std::string prefix;
  std::istringstream in(text);
  int n = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++n;
    std::string s = raw;
    if (const auto hash = s.find('#'); hash != std::string::npos) s.erase(hash);
    s = trim(s);
    if (s.empty()) continue;
    if (s.front() == '[' && s.back() == ']') {
      prefix = s.substr(1, s.size() - 2);
      if (prefix.empty() || prefix.back() != '.') prefix += '.';  // as Boost: "[]" makes the prefix "."
      continue;
    }
    const auto eq = s.find('=');
    if (eq == std::string::npos) throw ConfigError(file_line(path, n) + "expected KEY = VALUE, got '" + s + "'");
    const std::string key = prefix + trim(s.substr(0, eq));
    // An empty key matches every option in find_nothrow (po::ambiguous_option listing all seventy, no file or line).
    if (trim(s.substr(0, eq)).empty()) throw ConfigError(file_line(path, n) + "expected KEY = VALUE, got '" + s + "'");
    // --config on the command line names the file; a file naming another was ignored without a word.
    if (key == "config") throw ConfigError(file_line(path, n) + "a job file cannot name another (config)");
    if (desc.find_nothrow(key, false) == nullptr) {
      throw ConfigError(file_line(path, n) + "unknown option '" + key + "'");
    }
    lines.push_back(n);
  }
  std::istringstream again(text);
  FileOptions f{po::parse_config_file(again, desc), {}};
  f.lines = std::move(lines);
  if (f.lines.size() != f.parsed.options.size()) f.lines.assign(f.parsed.options.size(), 0);
  return f;
}

// store_checked for a file's options; what it refuses (a bad value, a key given twice) names the file and the line:
// the first of the file's options that, with those before it, a fresh map refuses.
void store_file_checked(FileOptions&& f, const std::string& path, po::variables_map& vm) {
  const FileOptions copy = f;
  const auto at = [&](const std::string& what) -> ConfigError {
    for (std::size_t i = 1; i <= copy.parsed.options.size(); ++i) {
      po::parsed_options prefix(copy.parsed.description);
      prefix.options.assign(copy.parsed.options.begin(), copy.parsed.options.begin() + static_cast<std::ptrdiff_t>(i));
      po::variables_map scratch;
      // The first prefix refused with this very error: store_checked checks every value before po::store sees a
      // repeated key, so a bad value on a later line than a repetition fails a shorter prefix for another reason.
      std::string refused;
      try {
        store_checked(std::move(prefix), scratch);
        continue;
      } catch (const po::error& e) {
        refused = e.what();
      } catch (const ConfigError& e) {
        refused = e.what();
      }
      if (refused != what) continue;
      if (copy.lines[i - 1] > 0) return ConfigError(file_line(path, copy.lines[i - 1]) + what);
      break;
    }
    return ConfigError("config: '" + path + "': " + what);
  };
  try {
    store_checked(std::move(f.parsed), vm);
  } catch (const po::error& e) {
    throw at(e.what());
  } catch (const ConfigError& e) {
    throw at(e.what());
  }
}
}  // namespace

po::options_description curve_options() {
  po::options_description o(
      "CURVE options (authentication and encryption of tcp:// connections, for jobs across hosts; the same on every "
      "process of a job; ipc:// and inproc:// are left as they are)");
  o.add_options()("net.curve-secret", po::value<std::string>(),
                  "FILE: this process's keypair, the NAME.key written by `afstream keygen` (mode 0600); turns CURVE "
                  "on, with net.curve-authorized")(
      "net.curve-authorized", po::value<std::string>(),
      "DIR|FILE: the public keys allowed to connect (a NAME.pub, or a directory of them: the keys of every host "
      "of the job); a process always lets in its own key too");
  return o;
}

CurveArgs parse_curve(const po::variables_map& vm) {
  CurveArgs c;
  const bool secret = vm.count("net.curve-secret") > 0, authorized = vm.count("net.curve-authorized") > 0;
  if (!secret && !authorized) return c;
  if (!secret || !authorized) {
    throw ConfigError(std::string(secret ? "net.curve-authorized" : "net.curve-secret") +
                      ": missing; CURVE needs both net.curve-secret (this process's keypair) and net.curve-authorized "
                      "(the public keys let in)");
  }
  if (!net::curve_available()) {
    throw ConfigError("net.curve-secret: this libzmq has no CURVE support (it was built without libsodium)");
  }
  namespace fs = std::filesystem;
  const auto secret_file = fs::absolute(vm["net.curve-secret"].as<std::string>()).lexically_normal().string();
  const auto authorized_path = fs::absolute(vm["net.curve-authorized"].as<std::string>()).lexically_normal().string();
  net::CurveConfig config;
  config.keys = net::read_curve_secret_file(secret_file, "net.curve-secret");
  config.authorized = net::read_curve_authorized(authorized_path, "net.curve-authorized");
  config.authorized.insert(config.keys.public_key);  // whoever holds this process's secret key is this job's own
  c.config = std::move(config);
  c.args = {"--net.curve-secret=" + secret_file, "--net.curve-authorized=" + authorized_path};
  return c;
}

po::options_description run_options() {
  po::options_description o("run options");
  o.add_options()("help,h", "show this help")("config", po::value<std::string>(),
                                              "job file (INI) with the same dotted keys; the command line wins")(
      "job", po::value<std::string>(), "job to run (see `afstream list`)")(
      "runtime", po::value<std::string>()->default_value("processes"),
      "processes (the default): every worker a process, with a backup server and a controller that kills and "
      "restarts them for real (ipc://); threads: every worker a thread of this process (ZeroMQ inproc://), the "
      "same job and results without the processes")("items", po::value<std::uint64_t>()->default_value(2000000),
                                                    "items the sources produce in all")(
      "seed", po::value<std::uint64_t>()->default_value(1), "seed of every generator")(
      "run.started-ns", po::value<std::int64_t>()->default_value(0),
      "wall-clock origin of the run's times, ns since the Unix epoch (0: now); `afstream run` passes its own to its "
      "worker processes, so that a restarted worker's times count from the same start")(
      "out", po::value<std::string>(), "directory for config.ini, meta.json, metrics.jsonl, failures.csv, summary.csv")(
      "quiet,q", po::bool_switch(),
      "no progress lines; with --out, the effective configuration is not printed but kept in its config.ini")(
      "ft.mode", po::value<std::string>()->default_value("approx"), ("fault tolerance: " + ft_mode_names()).c_str())(
      "ft.state-divergence-max", real_value(1e5), "Theta: state divergence allowed before a state backup")(
      "ft.theta", po::value<double>(), "alias of ft.state-divergence-max")(
      "ft.unbacked-items-max", real_value(1e3), "L: received, unprocessed items allowed without an item backup")(
      "ft.l", po::value<double>(), "alias of ft.unbacked-items-max")(
      "ft.unacked-items-max", real_value(1e3), "Gamma: unacknowledged output items a sender may hold")(
      "ft.gamma", po::value<double>(), "alias of ft.unacked-items-max")(
      "ft.reset", po::value<std::string>()->default_value("fixed"),
      "threshold reset policy after failures: fixed | hopping | sliding")(
      "ft.reset-window", po::value<std::uint64_t>()->default_value(0), "window length in items (hopping/sliding)")(
      "ft.exact-state-every", po::value<std::uint64_t>()->default_value(100000),
      "exact mode: items between state backups (approx too: a worker whose theta is below alpha, a stateless relay "
      "behind sources)")(
      "ft.replay-items-max", po::value<std::uint64_t>()->default_value(RunConfig{}.replay_items_max),
      "approx mode, behind replayable sources: the most items a recovery processes again (a state backup at least "
      "every so many items; 0: no such backups, except those of ft.replay-overhead-max)")(
      "ft.replay-overhead-max", real_value(RunConfig{}.replay_overhead_max),
      "approx mode, behind replayable sources: back up the state as often as costs at most this share of the "
      "processing time (measured), bounding the items a recovery processes again by the state's size: every few "
      "hundred items for a small state, rarely for a large one (0: off, except 0.01 for a worker whose store is "
      "remote, which backs up by this rule instead of Theta; ft.replay-items-max caps the interval)")(
      "ft.microbatch-interval", po::value<std::string>()->default_value("1s"),
      "microbatch mode: a batch closes (state checkpoint, outputs released) after this long (500ms, 2s, ...)")(
      "ft.microbatch-items", po::value<std::uint64_t>()->default_value(0),
      "microbatch mode: or after this many items processed (0: by interval only)")(
      "ft.ack-timeout", po::value<std::string>()->default_value("30s"),
      "ack mode: a source item whose tree of emitted items is not complete after this is replayed (Storm's "
      "message timeout)")("ft.ack-max-pending", po::value<std::uint64_t>()->default_value(16384),
                          "ack mode: incomplete trees a source may have before it waits (Storm's max spout pending)")(
      "ft.ack-state-every", po::value<std::uint64_t>()->default_value(4096),
      "ack mode: items between state backups; a worker acknowledges an item only once a backup holds its effect (a "
      "stateless operator at once)")(
      "ft.ask-every", po::value<std::uint64_t>()->default_value(8192),
      "ask mode: items a worker processes between checkpoints (at most half of net.flow-window: senders hold "
      "every item until a checkpoint covers it)")(
      "ft.checkpoint-interval", po::value<std::string>()->default_value("1s"),
      "checkpoint mode: a source starts a barrier checkpoint this long after the previous one started (100ms, 5s)")(
      "ft.checkpoint-items", po::value<std::uint64_t>()->default_value(0),
      "checkpoint mode: instead of the interval, a checkpoint after this many source items (0: by interval)")(
      "ft.checkpoint-timeout", po::value<std::string>()->default_value("60s"),
      "checkpoint mode: a checkpoint not complete this long after its start is abandoned (a failed checkpoint)")(
      "ft.checkpoint-min-pause", po::value<std::string>()->default_value("0ms"),
      "checkpoint mode: least time from a checkpoint's completion to the start of the next one")(
      "ft.checkpoint-tolerable-failures", po::value<std::uint64_t>()->default_value(0),
      "checkpoint mode: abandoned checkpoints a job tolerates; one more fails it")(
      "ft.state-headroom", real_value(0.0),
      "share of theta left for the state to drift while a backup is written asynchronously (0: synchronous)")(
      "ft.delta-residual", real_value(0.5),
      "approx: share of theta a state backup may leave unwritten, so that a delta carries only the state that "
      "moved most (0: whole deltas; the bounds hold either way, and Count-Min compensates the residual)")(
      "ft.full-backup-every", po::value<int>()->default_value(1024),
      "longest chain of delta backups after a full one (a full one also comes once the deltas weigh as much)")(
      "net.batch-items", po::value<std::size_t>()->default_value(1024), "items per message")(
      "net.flow-window", po::value<std::uint64_t>()->default_value(65536),
      "unacknowledged items a sender may hold when Gamma does not bound it (sources, exact mode)")(
      "net.in-flight-max", po::value<std::uint64_t>()->default_value(RunConfig{}.in_flight_max),
      "approx mode, sources: items a channel may have sent and not had acknowledged (0: no limit; a limit bounds the "
      "work a failure makes the source redo and the queueing latency, and may cost throughput)")(

      "net.queue-items", po::value<std::size_t>()->default_value(16384),
      "received items a worker queues before it stops reading")(
      "fail.count", po::value<int>()->default_value(0),
      "failures spread evenly from 10% to 90% of the input (added to fail.at and fail.random)")(
      "fail.target", po::value<std::string>()->default_value("all"),
      "workers killed at each failure: all | ID[,ID] | a failure domain's name")(
      "fail.domain", po::value<std::vector<std::string>>()->composing(),
      "a failure domain, NAME=ID[,ID] (workers killed together, e.g. a rack); repeatable")(
      "fail.random", po::value<int>()->default_value(0),
      "failures at seeded random points between 10% and 90% of the input (the seed is --seed)")(
      "process.store", po::value<std::string>()->default_value("rocksdb"),
      "runtime processes: the backup server's store, rocksdb (durable: the server is restarted after a crash and "
      "loses nothing it acknowledged) or memory")("process.heartbeat-ms", po::value<int>()->default_value(100),
                                                  "runtime processes: worker status interval (ms)")(
      "process.store-compact-ratio", real_value(ProcessClusterOptions{}.store_compact_ratio),
      "runtime processes: the backup server compacts a worker's state chain into one full snapshot once its deltas "
      "weigh this many times the snapshot (its --store.compact-ratio; 0: never, the workers write full snapshots "
      "at 4x)")("process.heartbeat-timeout-ms", po::value<int>()->default_value(5000),
                "runtime processes: a worker silent this long is presumed dead, killed and restarted (ms)")(
      "process.start-timeout-ms",
      po::value<int>()->default_value(static_cast<int>(ProcessClusterOptions{}.start_timeout.count())),
      "runtime processes: a worker process that has not reported this long after its start ends the run with an "
      "error (ms); until its first report it loads the program and builds the job, which reads any input file")(
      "process.standby", po::value<int>()->default_value(ProcessClusterOptions{}.standby),
      "runtime processes: spare worker processes kept started (job built, no state); a failed worker is taken over "
      "by one at once instead of a new process, which then replaces the spare (0: start a new process per failure)")(
      "process.fork-server",
      po::value<bool>()->default_value(ProcessClusterOptions{}.fork_server)->implicit_value(true),
      "runtime processes: restart failed workers by forking them from a fork server (one process with the program "
      "loaded and the job built) instead of starting the program anew (--process.fork-server=false: start it anew)")(
      "process.local-recovery",
      po::value<bool>()->default_value(ProcessClusterOptions{}.local_recovery)->implicit_value(true),
      "runtime processes: each local worker keeps a copy of its state chain in a private directory (on /dev/shm "
      "when there is one) and a restarted worker restores from it as far as the backup server vouches for it, "
      "instead of receiving the chain from the server (--process.local-recovery=false: always from the server)")(
      "fail.at", po::value<std::string>()->default_value(""),
      "failure points: comma-separated item counts or fractions of the input (0.25) processed, or times since the "
      "start (500ms, 2s, 1m, 1h); produced:N or produced:0.99 counts the items the sources produced instead");
  o.add(curve_options());
  return o;
}

po::options_description worker_options() {
  po::options_description o(
      "worker process options (set by the controller that starts the worker; a worker started by hand with no --job "
      "registers with --worker.controller and gets the job's options, its incarnation and the other endpoints from "
      "it)");
  o.add_options()("worker.id", po::value<int>(), "this worker's id in the topology")(
      "worker.standby", po::value<int>(),
      "SLOT: a spare process (started by a controller with process.standby): builds the job, then waits for the "
      "controller to assign it the next worker that fails (its id, incarnation and failures)")(
      "worker.fork-server", po::bool_switch(),
      "a fork server (started by a controller with process.fork-server): builds the job, then forks a worker process "
      "for each request on its stdin (WORKER EPOCH FAILURES), answering with its pid on file descriptor 3")(
      "worker.epoch", po::value<std::uint32_t>()->default_value(1), "incarnation: 1 + earlier failures")(
      "worker.failures", po::value<std::string>()->default_value(""),
      "items this worker had processed at each earlier failure, comma-separated")(
      "worker.prefix", po::value<std::string>(), "endpoint prefix where the worker binds on this host (ipc://DIR/)")(
      "worker.bind", po::value<std::string>(),
      "tcp://IP: bind on tcp at this address of this host, which the other workers reach (ports chosen by the "
      "operating system, announced to the controller); default for a registering worker: tcp://127.0.0.1")(
      "worker.restart", po::bool_switch(),
      "registering worker: keep it running, starting it again (as its next incarnation) whenever it dies of a signal")(
      "worker.controller", po::value<std::string>(), "the controller's report endpoint (tcp://HOST:PORT)")(
      "worker.directory", po::value<std::string>(), "the controller's directory endpoint")(
      "worker.store", po::value<std::string>(), "the backup server's endpoint")(
      "worker.heartbeat-ms", po::value<int>()->default_value(100), "status report interval (ms)")(
      "worker.controller-timeout-ms", po::value<int>()->default_value(10000),
      "stop when the controller has been silent this long (ms)")(
      "worker.local-state", po::value<std::string>(),
      "DIR: keep a copy of this worker's state chain in DIR and restore from it as far as the backup server vouches "
      "for it (local recovery; set by a controller with process.local-recovery)")(
      "worker.store-reads-copies", po::bool_switch(),
      "with worker.local-state: the backup server (on this host, its store.local-dir the same DIR) reads this "
      "worker's state records from its copy, so puts name their place there instead of carrying them")(
      "worker.store-deadline-ms", po::value<int>()->default_value(10000),
      "stop when the backup server has not answered a call for this long (ms; retried with backoff until then)")(
      "worker.controller-key", po::value<std::string>(),
      "CURVE: the controller's public key, a NAME.pub file or the key itself (40 characters, as `afstream "
      "controller` prints it)")(
      "worker.store-key", po::value<std::string>(),
      "CURVE: the backup server's public key (file or key); a registering worker gets it from the controller");
  return o;
}

WorkerProcessOptions parse_worker(const po::variables_map& vm) {
  WorkerProcessOptions w;
  auto need = [&](const char* key) {
    if (!vm.count(key)) throw ConfigError(std::string("worker: missing --") + key);
    return vm[key].as<std::string>();
  };
  const bool fork_server = vm.count("worker.fork-server") && vm["worker.fork-server"].as<bool>();
  if (fork_server && vm.count("worker.standby")) {
    throw ConfigError("worker.fork-server: a fork server is not a standby (worker.standby); give one or the other");
  }
  if (vm.count("worker.standby") || fork_server) {
    // Its worker, incarnation and failures come with its assignment (registration.h, await_assignment) or request
    // (fork_server.h).
    const std::string which = fork_server ? "worker.fork-server: a fork server" : "worker.standby: a standby";
    for (const char* assigned : {"worker.id", "worker.epoch", "worker.failures"}) {
      if (!vm[assigned].empty() && !vm[assigned].defaulted()) {
        throw ConfigError(which + " gets --" + assigned +
                          " from its controller for each worker; give one or the other");
      }
    }
    if (vm.count("worker.standby") && vm["worker.standby"].as<int>() < 0) {
      throw ConfigError("worker.standby: expected a slot >= 0, got " + std::to_string(vm["worker.standby"].as<int>()));
    }
  } else if (!vm.count("worker.id")) {
    throw ConfigError("worker: missing --worker.id");
  } else {
    w.worker = vm["worker.id"].as<int>();
  }
  w.epoch = vm["worker.epoch"].as<std::uint32_t>();
  const auto failures = vm["worker.failures"].as<std::string>();
  std::stringstream ss(failures);
  std::string part;
  while (std::getline(ss, part, ',')) {
    try {
      w.failures.push_back(std::stoull(part));
    } catch (const std::exception&) {
      throw ConfigError("worker.failures: expected item counts separated by commas, got '" + part + "'");
    }
  }
  if (vm.count("worker.bind") && vm.count("worker.prefix")) {
    throw ConfigError("worker: give either --worker.bind tcp://IP or --worker.prefix ipc://DIR/, not both");
  }
  if (vm.count("worker.bind")) {
    w.bind = net::parse_tcp_bind(vm["worker.bind"].as<std::string>(), "worker.bind", false).endpoint();
  } else if (vm.count("worker.prefix")) {
    w.bind = vm["worker.prefix"].as<std::string>();
    if (net::is_tcp(w.bind)) throw ConfigError("worker.prefix: for ipc:// only; on tcp give --worker.bind tcp://IP");
  } else {
    throw ConfigError("worker: missing --worker.bind tcp://IP (or --worker.prefix ipc://DIR/)");
  }
  w.controller = need("worker.controller");
  w.directory = need("worker.directory");
  w.store = need("worker.store");
  net::check_connect_endpoint(w.controller, "worker.controller");
  net::check_connect_endpoint(w.directory, "worker.directory");
  net::check_connect_endpoint(w.store, "worker.store");
  const int hb = vm["worker.heartbeat-ms"].as<int>();
  const int timeout = vm["worker.controller-timeout-ms"].as<int>();
  const int store_deadline = vm["worker.store-deadline-ms"].as<int>();
  if (store_deadline <= 0) throw ConfigError("worker.store-deadline-ms: expected > 0");
  w.store_deadline = std::chrono::milliseconds(store_deadline);
  if (vm.count("worker.local-state")) {
    w.local_state = vm["worker.local-state"].as<std::string>();
    if (w.local_state.empty()) throw ConfigError("worker.local-state: expected a directory, got ''");
  }
  w.store_reads_copies = vm["worker.store-reads-copies"].as<bool>();
  if (w.store_reads_copies && w.local_state.empty()) {
    throw ConfigError("worker.store-reads-copies: needs worker.local-state (the directory of the copies)");
  }
  if (hb <= 0 || timeout <= 0) throw ConfigError("worker.heartbeat-ms and worker.controller-timeout-ms: expected > 0");
  w.heartbeat = std::chrono::milliseconds(hb);
  w.controller_timeout = std::chrono::milliseconds(timeout);
  const bool curve = vm.count("net.curve-secret") > 0;
  for (const char* key : {"worker.controller-key", "worker.store-key"}) {
    if (!vm.count(key)) continue;
    if (!curve) throw ConfigError(std::string(key) + ": only with CURVE (net.curve-secret, net.curve-authorized)");
    (key == std::string("worker.controller-key") ? w.controller_key : w.store_key) =
        net::read_curve_public_key(vm[key].as<std::string>(), key);
  }
  return w;
}

namespace {
// Job::run_defaults: each value replaces a run option's general default unless the user gave the option (or its
// alias); it is stored as if given, so it is printed and passed on like one.
void apply_run_defaults(const Job& job, const po::options_description& desc, po::variables_map& vm) {
  for (const auto& [key, value] : job.run_defaults()) {
    const auto* option = desc.find_nothrow(key, false);
    if (option == nullptr) throw ConfigError("job " + job.name() + ": default for unknown option '" + key + "'");
    if (vm.count(key) && !vm[key].defaulted()) continue;
    bool alias_given = false;
    for (const auto& a : kAliases) alias_given = alias_given || (key == a.primary && vm.count(a.alias));
    if (alias_given) continue;
    boost::any parsed;
    option->semantic()->parse(
        parsed, {is_unsigned_option(option->semantic().get()) ? whole_number_text(key, value) : value}, false);
    vm.erase(key);
    vm.insert({key, po::variable_value(parsed, false)});
  }
}
}  // namespace

RunOptions parse_run(int argc, const char* const* argv, const Job* job, po::variables_map& vm,
                     const po::options_description* extra) {
  auto desc = run_options();
  if (extra) desc.add(*extra);
  // Given on the command line (not by a job file, which may be a run's config.ini holding every option, nor by
  // Job::run_defaults): the options noted when the chosen ft.mode does not use them.
  std::vector<std::string> given_on_command_line;
  if (job) {
    po::options_description jo(job->name() + " options");
    job->add_options(jo);
    // A job option with the name of a run option (or one the job declares twice) made Boost refuse only a command
    // line that gave it ("option '--seed' is ambiguous"), or cast it to the wrong type ("boost::bad_any_cast"), and
    // passed silently otherwise: refuse the job itself, naming the option.
    std::set<std::string> own;
    for (const auto& o : jo.options()) {
      const auto& name = o->long_name();
      const bool run_option = desc.find_nothrow(name, false) != nullptr;
      if (run_option || !own.insert(name).second) {
        throw ConfigError("job " + job->name() + " declares option '" + name + "', which " +
                          (run_option ? "is a run option" : "it declares twice") +
                          ": give the job's options a prefix of their own (" + job->name() + ".NAME)");
      }
    }
    desc.add(jo);
  }
  try {
    store_checked(parse_command_line(argc, argv, desc), vm);
    for (const auto& [key, value] : vm) {
      if (!value.defaulted()) given_on_command_line.push_back(key);
    }
    if (vm.count("config")) {
      const auto path = vm["config"].as<std::string>();
      std::ifstream f(path);
      if (!f) throw InputError("config: cannot read job file '" + path + "'");
      const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      const auto given = [&](const std::string& key) { return vm.count(key) && !vm[key].defaulted(); };
      // A value a job file cannot hold, which a run's config.ini notes in a comment (kUnheldNote, effective_config):
      // the command line must give it, or the repeat would run on the option's default without a word (a corpus
      // directory with '#' in its name became the synthetic corpus).
      {
        std::istringstream lines(text);
        for (std::string line; std::getline(lines, line);) {
          if (line.rfind("# ", 0) != 0 || line.find(kUnheldNote) == std::string::npos) continue;
          const std::string key = line.substr(2, line.find(" = ") - 2);
          if (!given(key)) {
            throw ConfigError("config: '" + path + "' could not hold " + key +
                              "'s value (it has a '#' or spaces at an end): give --" + key + " on the command line");
          }
        }
      }
      auto file = parse_options_file(text, path, desc);
      // A run's config.ini: its relative paths as the run took them, from where it was started.
      // Not when it was started here: the paths mean what they say, and stay relative in this run's config.ini (made
      // absolute, a start directory with '#' in its name made them values a job file cannot hold).
      std::error_code here_ec;
      if (const auto from = started_in(text);
          from && !std::filesystem::equivalent(*from, std::filesystem::current_path(here_ec), here_ec)) {
        for (auto& o : file.parsed.options) {
          const auto* d = desc.find_nothrow(o.string_key, false);
          if (d == nullptr || !names_a_path(*d) || o.value.size() != 1 || o.value[0].empty()) continue;
          if (std::filesystem::path(o.value[0]).is_relative()) o.value[0] = (*from / o.value[0]).lexically_normal();
        }
      }
      // The command line wins: over the file's other spelling of the same threshold (a run's config.ini has the
      // primary name; `--ft.theta 5` on the command line then replaces it instead of conflicting with it), and
      // over a list's entries in the file (`--fail.domain` replaces the file's domains instead of adding to them).
      const auto overridden = [&](const po::option& o) {
        return given(o.string_key) || std::any_of(std::begin(kAliases), std::end(kAliases), [&](const Alias& a) {
                 return (o.string_key == a.primary && given(a.alias)) || (o.string_key == a.alias && given(a.primary));
               });
      };
      FileOptions kept{po::parsed_options(file.parsed.description), {}};
      for (std::size_t i = 0; i < file.parsed.options.size(); ++i) {
        if (overridden(file.parsed.options[i])) continue;
        kept.parsed.options.push_back(file.parsed.options[i]);
        kept.lines.push_back(file.lines[i]);
      }
      store_file_checked(std::move(kept), path, vm);
    }
    if (job) apply_run_defaults(*job, desc, vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw ConfigError(e.what());
  }
  RunOptions r;
  if (vm.count("job")) r.job = vm["job"].as<std::string>();
  if (vm.count("out")) r.out_dir = vm["out"].as<std::string>();
  r.runtime = vm["runtime"].as<std::string>();
  if (r.runtime != "threads" && r.runtime != "processes") {
    throw ConfigError("runtime: '" + r.runtime + "' is not a runtime (expected threads or processes)");
  }
  r.items = vm["items"].as<std::uint64_t>();
  r.seed = vm["seed"].as<std::uint64_t>();
  r.config.started_ns = vm["run.started-ns"].as<std::int64_t>();
  if (r.config.started_ns < 0) {
    throw ConfigError("run.started-ns: expected ns since the Unix epoch (0: now), got " +
                      std::to_string(r.config.started_ns));
  }
  if (r.config.started_ns == 0) {
    r.config.started_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
  }
  r.quiet = vm["quiet"].as<bool>();
  auto& c = r.config;
  c.mode = parse_ft_mode(vm["ft.mode"].as<std::string>());
  // The options of one fault-tolerance mode (the rest apply to all): given for another, they are noted.
  {
    struct ModeOptions {
      const char* prefix;  // a key, or a key prefix ending in '-'
      std::vector<FtMode> modes;
      const char* modes_text;
    };
    const ModeOptions kModeOptions[] = {
        {"ft.state-divergence-max", {FtMode::Approx}, "approx"},
        {"ft.theta", {FtMode::Approx}, "approx"},
        {"ft.unbacked-items-max", {FtMode::Approx}, "approx"},
        {"ft.l", {FtMode::Approx}, "approx"},
        {"ft.unacked-items-max", {FtMode::Approx}, "approx"},
        {"ft.gamma", {FtMode::Approx}, "approx"},
        {"ft.reset", {FtMode::Approx}, "approx"},
        {"ft.reset-", {FtMode::Approx}, "approx"},
        {"ft.replay-", {FtMode::Approx}, "approx"},
        {"ft.state-headroom", {FtMode::Approx}, "approx"},
        {"ft.delta-residual", {FtMode::Approx}, "approx"},
        {"net.in-flight-max", {FtMode::Approx}, "approx"},
        // Read by exact mode's state backups and by approx's where it logs every item (theta below alpha) or relays
        // behind sources; the other modes back up on their own options (ft.ask-every, ft.ack-state-every, batches,
        // barriers).
        {"ft.exact-state-every", {FtMode::Exact, FtMode::Approx}, "exact and approx"},
        {"ft.microbatch-", {FtMode::MicroBatch}, "microbatch"},
        {"ft.ack-", {FtMode::Ack}, "ack"},
        {"ft.ask-every", {FtMode::Ask}, "ask"},
        {"ft.checkpoint-", {FtMode::Checkpoint}, "checkpoint"},
    };
    for (const auto& key : given_on_command_line) {
      for (const auto& m : kModeOptions) {
        const std::string_view prefix = m.prefix;
        const bool matches = prefix.back() == '-' ? key.starts_with(prefix) : key == prefix;
        if (!matches || std::find(m.modes.begin(), m.modes.end(), c.mode) != m.modes.end()) continue;
        r.unused_by_mode.push_back("--" + key + " (" + m.modes_text + " only)");
      }
    }
  }
  // The process runtime's options under --runtime threads (a spare or a memory store asked for and silently not had).
  if (r.runtime == "threads") {
    for (const auto& key : given_on_command_line) {
      if (key.starts_with("process.")) {
        r.unused_by_runtime.push_back("--" + key + " has no effect (--runtime processes only)");
      }
    }
  }
  // The job's options that its other options leave without effect (Job::unused_options), given on the command line.
  if (job) {
    for (const auto& [key, why] : job->unused_options(vm)) {
      if (std::find(given_on_command_line.begin(), given_on_command_line.end(), key) != given_on_command_line.end()) {
        r.unused_by_job.push_back("--" + key + " has no effect (" + why + ")");
      }
    }
  }
  auto bound = [&](const Alias& a) {
    if (vm.count(a.alias)) {
      if (!vm[a.primary].defaulted()) {
        throw ConfigError(std::string("give either --") + a.primary + " or its alias --" + a.alias + ", not both");
      }
      return vm[a.alias].as<double>();
    }
    return vm[a.primary].as<double>();
  };
  c.bounds = {bound(kAliases[0]), bound(kAliases[1]), bound(kAliases[2])};
  c.bounds.validate();
  c.reset = parse_reset_policy(vm["ft.reset"].as<std::string>());
  c.reset_window = vm["ft.reset-window"].as<std::uint64_t>();
  (void)ThresholdSchedule(c.bounds, {}, c.reset, c.reset_window);  // its checks (a reset's window) before anything runs
  c.exact_state_every = vm["ft.exact-state-every"].as<std::uint64_t>();
  c.replay_items_max = vm["ft.replay-items-max"].as<std::uint64_t>();
  c.replay_overhead_max = vm["ft.replay-overhead-max"].as<double>();
  if (!(c.replay_overhead_max >= 0 && c.replay_overhead_max < 1)) {
    throw ConfigError("ft.replay-overhead-max: expected a share 0 <= f < 1, got " +
                      std::to_string(c.replay_overhead_max));
  }
  if (c.exact_state_every == 0) throw ConfigError("ft.exact-state-every: expected > 0");
  c.state_headroom = vm["ft.state-headroom"].as<double>();
  if (!(c.state_headroom >= 0 && c.state_headroom < 1)) throw ConfigError("ft.state-headroom: expected 0 <= h < 1");
  c.delta_residual = vm["ft.delta-residual"].as<double>();
  if (!(c.delta_residual >= 0 && c.delta_residual < 1)) throw ConfigError("ft.delta-residual: expected 0 <= r < 1");
  c.full_backup_every = vm["ft.full-backup-every"].as<int>();
  if (c.full_backup_every < 1) throw ConfigError("ft.full-backup-every: expected >= 1");
  c.batch_items = vm["net.batch-items"].as<std::size_t>();
  c.flow_window = vm["net.flow-window"].as<std::uint64_t>();
  c.in_flight_max = vm["net.in-flight-max"].as<std::uint64_t>();
  c.queue_items = vm["net.queue-items"].as<std::size_t>();
  validate_transport(c);
  if (c.queue_items < c.batch_items) throw ConfigError("net.queue-items: expected >= net.batch-items");
  c.microbatch_interval = parse_duration(vm["ft.microbatch-interval"].as<std::string>(), "ft.microbatch-interval");
  if (c.microbatch_interval.count() == 0) throw ConfigError("ft.microbatch-interval: expected > 0");
  c.microbatch_items = vm["ft.microbatch-items"].as<std::uint64_t>();
  c.ack_timeout = parse_duration(vm["ft.ack-timeout"].as<std::string>(), "ft.ack-timeout");
  if (c.ack_timeout.count() == 0) throw ConfigError("ft.ack-timeout: expected > 0");
  c.ack_max_pending = vm["ft.ack-max-pending"].as<std::uint64_t>();
  if (c.ack_max_pending == 0) throw ConfigError("ft.ack-max-pending: expected > 0");
  c.ack_state_every = vm["ft.ack-state-every"].as<std::uint64_t>();
  if (c.ack_state_every == 0) throw ConfigError("ft.ack-state-every: expected > 0");
  c.checkpoint_interval = parse_duration(vm["ft.checkpoint-interval"].as<std::string>(), "ft.checkpoint-interval");
  if (c.checkpoint_interval.count() == 0) throw ConfigError("ft.checkpoint-interval: expected > 0");
  c.checkpoint_items = vm["ft.checkpoint-items"].as<std::uint64_t>();
  // A count paces the checkpoints instead of the interval (Worker::start_checkpoint_if_due): both given, the
  // interval is unused.
  if (c.mode == FtMode::Checkpoint && c.checkpoint_items > 0 &&
      std::find(given_on_command_line.begin(), given_on_command_line.end(), "ft.checkpoint-interval") !=
          given_on_command_line.end()) {
    r.unused_by_job.push_back("--ft.checkpoint-interval has no effect (ft.checkpoint-items paces the checkpoints)");
  }
  c.checkpoint_timeout = parse_duration(vm["ft.checkpoint-timeout"].as<std::string>(), "ft.checkpoint-timeout");
  if (c.checkpoint_timeout.count() == 0) throw ConfigError("ft.checkpoint-timeout: expected > 0");
  c.checkpoint_min_pause = parse_duration(vm["ft.checkpoint-min-pause"].as<std::string>(), "ft.checkpoint-min-pause");
  c.checkpoint_tolerable_failures = vm["ft.checkpoint-tolerable-failures"].as<std::uint64_t>();
  c.ask_every = vm["ft.ask-every"].as<std::uint64_t>();
  // Checked only where it applies: a smaller net.flow-window must not need an ask-mode option in other modes.
  if (c.mode == FtMode::Ask && (c.ask_every == 0 || c.ask_every > c.flow_window / 2)) {
    throw ConfigError("ft.ask-every: expected 1 .. net.flow-window / 2 = " + std::to_string(c.flow_window / 2) +
                      ", got " + std::to_string(c.ask_every));
  }
  r.fail_count = vm["fail.count"].as<int>();
  if (r.fail_count < 0) throw ConfigError("fail.count: expected >= 0");
  r.fail_target = vm["fail.target"].as<std::string>();
  r.fail_at = vm["fail.at"].as<std::string>();
  r.fail_random = vm["fail.random"].as<int>();
  if (r.fail_random < 0) throw ConfigError("fail.random: expected >= 0");
  if (vm.count("fail.domain")) {
    for (const auto& d : vm["fail.domain"].as<std::vector<std::string>>()) {
      const auto eq = d.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == d.size()) {
        throw ConfigError("fail.domain: expected NAME=ID[,ID], got '" + d + "'");
      }
      const std::string name = d.substr(0, eq);
      // fail.target reads `all` first, then the domains, then worker ids: a domain called all, or named like a
      // worker list (3, 1,2), was shadowed or shadowed the worker, and a second domain of the same name was ignored.
      if (name == "all" || name.find(',') != std::string::npos ||
          name.find_first_not_of("0123456789") == std::string::npos) {
        throw ConfigError("fail.domain: '" + name + "' cannot name a domain (fail.target reads it as " +
                          (name == "all" ? std::string("every worker") : std::string("worker ids")) + ")");
      }
      for (const auto& [other, ids] : r.fail_domains) {
        if (other == name)
          throw ConfigError("fail.domain: domain '" + name + "' given twice (" + other + "=" + ids + " and " + d + ")");
      }
      r.fail_domains.emplace_back(name, d.substr(eq + 1));
    }
  }
  r.process_store = vm["process.store"].as<std::string>();
  if (r.process_store != "rocksdb" && r.process_store != "memory") {
    throw ConfigError("process.store: expected rocksdb or memory, got '" + r.process_store + "'");
  }
  r.process_store_compact_ratio = vm["process.store-compact-ratio"].as<double>();
  if (!(r.process_store_compact_ratio >= 0) || !std::isfinite(r.process_store_compact_ratio)) {
    throw ConfigError("process.store-compact-ratio: expected a number >= 0 (0: never compact), got " +
                      std::to_string(r.process_store_compact_ratio));
  }
  r.process_standby = vm["process.standby"].as<int>();
  r.process_fork_server = vm["process.fork-server"].as<bool>();
  r.process_local_recovery = vm["process.local-recovery"].as<bool>();
  if (r.process_standby < 0) {
    throw ConfigError("process.standby: expected a number of spare processes >= 0, got " +
                      std::to_string(r.process_standby));
  }
  r.heartbeat_ms = vm["process.heartbeat-ms"].as<int>();
  r.heartbeat_timeout_ms = vm["process.heartbeat-timeout-ms"].as<int>();
  if (r.heartbeat_ms <= 0 || r.heartbeat_timeout_ms <= r.heartbeat_ms) {
    throw ConfigError("process.heartbeat-ms and process.heartbeat-timeout-ms: expected 0 < interval < timeout");
  }
  r.start_timeout_ms = vm["process.start-timeout-ms"].as<int>();
  if (r.start_timeout_ms <= 0) {
    throw ConfigError("process.start-timeout-ms: expected > 0, got " + std::to_string(r.start_timeout_ms));
  }
  if (!vm.count("help")) r.curve = parse_curve(vm);
  return r;
}

po::options_description backup_server_options() {
  po::options_description o("backup-server options");
  o.add_options()("help,h", "show this help")("config", po::value<std::string>(),
                                              "options file (INI) with the same dotted keys; the command line wins")(
      "listen", po::value<std::string>()->default_value("tcp://127.0.0.1:5560"),
      "endpoint to serve on: tcp://HOST:PORT (port 0: any free port) or ipc://PATH")(
      "store", po::value<std::string>()->default_value("rocksdb"),
      "backend: rocksdb (durable, in store.path) | memory (lost when the server stops)")(
      "store.path", po::value<std::string>(), "rocksdb: directory of the store (created if missing)")(
      "store.sync", po::bool_switch(), "rocksdb: fsync every put (survives a machine crash, slower)")(
      "store.compact-ratio", real_value(CompactionPolicy{}.delta_ratio),
      "compact a worker's state chain into one full snapshot, in the background, once its deltas weigh this many "
      "times its full snapshot (0: never compact; workers then write full snapshots themselves)")(
      "store.compact-deltas", po::value<std::uint64_t>()->default_value(CompactionPolicy{}.max_deltas),
      "... or once it has this many deltas")(
      "store.local-dir", po::value<std::string>(),
      "DIR: the local copies of the workers on this host (their --worker.local-state): a put that names its record's "
      "place in its worker's copy is read from there, checked against its digest (local recovery)")(
      "endpoint-file", po::value<std::string>(),
      "once listening, write the endpoint (with the port chosen for port 0) to this file")(
      "remove-if-orphaned", po::value<std::vector<std::string>>()->composing(),
      "DIR (repeatable): remove it when the server stops because the process that started it has ended (a "
      "controller killed: the run's private directories, which it would have removed; workers' copies on /dev/shm "
      "are memory)")(
      "quiet,q", po::bool_switch(),
      "no lines about the store and the endpoint at the start: only CURVE's, problems and the counters at the end");
  o.add(curve_options());
  return o;
}

BackupServerArgs parse_backup_server(int argc, const char* const* argv, po::variables_map& vm) {
  const auto desc = backup_server_options();
  try {
    store_checked(parse_command_line(argc, argv, desc), vm);
    if (vm.count("config")) {
      const auto path = vm["config"].as<std::string>();
      std::ifstream f(path);
      if (!f) throw InputError("config: cannot read options file '" + path + "'");
      const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      store_file_checked(parse_options_file(text, path, desc), path, vm);
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw ConfigError(e.what());
  }
  BackupServerArgs a;
  a.listen = vm["listen"].as<std::string>();
  if (a.listen.empty()) throw ConfigError("listen: expected an endpoint (tcp://HOST:PORT or ipc://PATH)");
  // As every tcp:// address of a job: one the other hosts reach, never a wildcard (runtime/README.md, Across hosts).
  if (a.listen.starts_with("tcp://")) {
    (void)net::parse_tcp_bind(a.listen, "listen", true);
  } else if (!a.listen.starts_with("ipc://")) {  // ZeroMQ's own words ("Protocol not supported") named no option
    throw ConfigError("listen: '" + a.listen + "' is not an endpoint (expected tcp://HOST:PORT or ipc://PATH)");
  }
  a.store = vm["store"].as<std::string>();
  if (vm.count("store.path")) a.store_path = vm["store.path"].as<std::string>();
  a.store_sync = vm["store.sync"].as<bool>();
  a.quiet = vm["quiet"].as<bool>();
  if (vm.count("endpoint-file")) a.endpoint_file = vm["endpoint-file"].as<std::string>();
  if (vm.count("remove-if-orphaned")) a.remove_if_orphaned = vm["remove-if-orphaned"].as<std::vector<std::string>>();
  if (vm.count("store.local-dir")) {
    a.local_dir = vm["store.local-dir"].as<std::string>();
    if (a.local_dir.empty()) throw ConfigError("store.local-dir: expected a directory, got ''");
  }
  a.compact_ratio = vm["store.compact-ratio"].as<double>();
  if (!(a.compact_ratio >= 0) || !std::isfinite(a.compact_ratio)) {
    throw ConfigError("store.compact-ratio: expected a number >= 0 (0: never compact), got " +
                      std::to_string(a.compact_ratio));
  }
  a.compact_deltas = vm["store.compact-deltas"].as<std::uint64_t>();
  if (a.compact_deltas < 1) throw ConfigError("store.compact-deltas: expected >= 1");
  if (a.store == "rocksdb") {
    if (a.store_path.empty() && !vm.count("help")) {
      throw ConfigError("store.path: required with --store rocksdb (the store's directory, created if missing)");
    }
  } else if (a.store == "memory") {
    if (!a.store_path.empty()) throw ConfigError("store.path: only for --store rocksdb (the memory store has none)");
    if (a.store_sync) throw ConfigError("store.sync: only for --store rocksdb");
  } else {
    throw ConfigError("store: expected memory or rocksdb, got '" + a.store + "'");
  }
  if (!vm.count("help")) a.curve = parse_curve(vm);
  return a;
}

po::options_description keygen_options() {
  po::options_description o("keygen options");
  o.add_options()("help,h", "show this help")("out", po::value<std::string>(),
                                              "directory to write the keypair in (created if missing)")(
      "name", po::value<std::string>()->default_value("afstream"),
      "file name: NAME.key (the secret key file, mode 0600) and NAME.pub (the public key file)");
  return o;
}

KeygenArgs parse_keygen(int argc, const char* const* argv, po::variables_map& vm) {
  try {
    store_checked(parse_command_line(argc, argv, keygen_options()), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw ConfigError(e.what());
  }
  KeygenArgs k;
  if (vm.count("help")) return k;
  if (!vm.count("out")) throw ConfigError("keygen: missing --out DIR (where to write NAME.key and NAME.pub)");
  k.out = vm["out"].as<std::string>();
  if (k.out.empty()) throw ConfigError("out: expected a directory");
  k.name = vm["name"].as<std::string>();
  if (k.name.empty() || k.name.find('/') != std::string::npos || k.name[0] == '.') {
    throw ConfigError("name: '" + k.name + "' is not a file name (no '/', not starting with '.')");
  }
  return k;
}

po::options_description controller_options() {
  po::options_description o("controller options (afstream controller: workers across hosts)");
  o.add_options()("controller.bind", po::value<std::string>()->default_value("tcp://127.0.0.1"),
                  "tcp://IP[:PORT]: the address of this host the workers reach; reports on PORT, the directory on "
                  "PORT+1, the backup server it starts on PORT+2 (no PORT: ports chosen by the operating system; all "
                  "printed at start); the workers it starts bind there too")(
      "controller.remote-workers", po::value<std::string>()->default_value(""),
      "ID[,ID]: workers not started here but by hand on their hosts (`afstream worker --worker.id ID "
      "--worker.controller ENDPOINT --worker.bind tcp://THEIR_IP --worker.restart`); they register")(
      "controller.backup-server", po::value<std::string>()->default_value(""),
      "tcp://HOST:PORT of a backup server started by hand (`afstream backup-server`); default: start one here")(
      "controller.backup-server-key", po::value<std::string>(),
      "CURVE: the public key of that backup server (its NAME.pub, or the key itself)")(
      "controller.register-timeout-ms", po::value<int>()->default_value(300000),
      "give up when a remote worker has not registered this long after the start or its failure (ms)");
  return o;
}

ControllerArgs parse_controller(const po::variables_map& vm, int worker_count) {
  ControllerArgs c;
  c.bind = vm["controller.bind"].as<std::string>();
  (void)net::parse_tcp_bind(c.bind, "controller.bind", true);
  const auto remote = vm["controller.remote-workers"].as<std::string>();
  std::stringstream ss(remote);
  std::string part;
  while (std::getline(ss, part, ',')) {
    int id = -1;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), id);
    if (ec != std::errc() || end != part.data() + part.size() || part.empty()) {
      throw ConfigError("controller.remote-workers: expected worker ids separated by commas, got '" + remote + "'");
    }
    if (id < 0 || id >= worker_count) {
      throw ConfigError("controller.remote-workers: no worker " + part + " in this job (workers are 0.." +
                        std::to_string(worker_count - 1) + ")");
    }
    c.remote_workers.push_back(id);
  }
  c.backup_server = vm["controller.backup-server"].as<std::string>();
  if (!c.backup_server.empty()) net::check_connect_endpoint(c.backup_server, "controller.backup-server");
  if (vm.count("controller.backup-server-key")) {
    if (c.backup_server.empty()) {
      throw ConfigError(
          "controller.backup-server-key: only with controller.backup-server (a backup server started "
          "by hand)");
    }
    if (!vm.count("net.curve-secret")) {
      throw ConfigError("controller.backup-server-key: only with CURVE (net.curve-secret, net.curve-authorized)");
    }
    c.backup_server_key = net::read_curve_public_key(vm["controller.backup-server-key"].as<std::string>(),
                                                     "controller.backup-server-key");
  } else if (vm.count("net.curve-secret") && net::is_tcp(c.backup_server)) {
    throw ConfigError("controller.backup-server-key: needed with net.curve-secret to reach the backup server at " +
                      c.backup_server + " (its public key: the NAME.pub of the key it serves with)");
  }
  c.register_timeout_ms = vm["controller.register-timeout-ms"].as<int>();
  if (c.register_timeout_ms <= 0) throw ConfigError("controller.register-timeout-ms: expected > 0");
  return c;
}

RegisteringWorkerArgs parse_registering_worker(int argc, const char* const* argv) {
  po::options_description desc = worker_options();
  desc.add(curve_options());
  po::variables_map vm;
  try {
    store_checked(parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::unknown_option& e) {
    throw ConfigError(std::string(e.what()) +
                      " (a worker given no --job takes the job's options from its controller: give only worker.* "
                      "and net.curve-* options)");
  } catch (const po::error& e) {  // a bad value of a worker.* option: the hint above would mislead
    throw ConfigError(e.what());
  }
  RegisteringWorkerArgs r;
  if (!vm.count("worker.id")) throw ConfigError("worker: missing --worker.id");
  r.worker = vm["worker.id"].as<int>();
  if (r.worker < 0) throw ConfigError("worker.id: expected >= 0, got " + std::to_string(r.worker));
  if (!vm.count("worker.controller")) {
    throw ConfigError(
        "worker: missing --worker.controller tcp://HOST:PORT (the report endpoint `afstream controller` "
        "prints), or --job with the job's options");
  }
  r.controller = vm["worker.controller"].as<std::string>();
  net::check_connect_endpoint(r.controller, "worker.controller");
  for (const char* set_by_controller : {"worker.epoch", "worker.failures", "worker.prefix"}) {
    if (vm.count(set_by_controller) && !vm[set_by_controller].defaulted()) {
      throw ConfigError(std::string(set_by_controller) +
                        ": set by the controller when the worker registers (a worker given no --job)");
    }
  }
  r.has_bind = vm.count("worker.bind") > 0;
  if (r.has_bind) (void)net::parse_tcp_bind(vm["worker.bind"].as<std::string>(), "worker.bind", false);
  r.has_directory = vm.count("worker.directory") > 0;
  r.has_store = vm.count("worker.store") > 0;
  if (r.has_directory) net::check_connect_endpoint(vm["worker.directory"].as<std::string>(), "worker.directory");
  if (r.has_store) net::check_connect_endpoint(vm["worker.store"].as<std::string>(), "worker.store");
  r.has_heartbeat = !vm["worker.heartbeat-ms"].defaulted();
  const int timeout = vm["worker.controller-timeout-ms"].as<int>();
  if (timeout <= 0) throw ConfigError("worker.controller-timeout-ms: expected > 0");
  r.controller_timeout = std::chrono::milliseconds(timeout);
  const auto curve = parse_curve(vm);
  r.has_store_key = vm.count("worker.store-key") > 0;
  if (curve.config) {
    if (!vm.count("worker.controller-key")) {
      throw ConfigError(
          "worker.controller-key: missing; with CURVE (net.curve-secret) a worker needs the controller's public "
          "key (its NAME.pub, or the key `afstream controller` prints)");
    }
    r.curve = net::CurveClient{
        curve.config->keys,
        net::read_curve_public_key(vm["worker.controller-key"].as<std::string>(), "worker.controller-key")};
    if (r.has_store_key) (void)net::read_curve_public_key(vm["worker.store-key"].as<std::string>(), "worker.store-key");
  } else {
    for (const char* key : {"worker.controller-key", "worker.store-key"}) {
      if (vm.count(key)) {
        throw ConfigError(std::string(key) + ": only with CURVE (net.curve-secret, net.curve-authorized)");
      }
    }
  }
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) != "--worker.restart") r.given.emplace_back(argv[i]);
  }
  return r;
}

namespace {
// An option's value as text, exactly (numbers reread as the same value), one text per element of a list; nullopt for
// a type no option of this program has. Shared by the workers' arguments and config.ini.
std::optional<std::vector<std::string>> value_texts(const boost::any& a) {
  if (auto* p = boost::any_cast<std::string>(&a)) return std::vector<std::string>{*p};
  if (auto* d = boost::any_cast<double>(&a)) return std::vector<std::string>{exact_text(*d)};
  if (auto* u = boost::any_cast<std::uint64_t>(&a)) return std::vector<std::string>{std::to_string(*u)};
  if (auto* i = boost::any_cast<int>(&a)) return std::vector<std::string>{std::to_string(*i)};
  if (auto* i64 = boost::any_cast<std::int64_t>(&a)) return std::vector<std::string>{std::to_string(*i64)};
  if (auto* u32 = boost::any_cast<std::uint32_t>(&a)) return std::vector<std::string>{std::to_string(*u32)};
  if (auto* b = boost::any_cast<bool>(&a)) return std::vector<std::string>{*b ? "true" : "false"};
  if (auto* list = boost::any_cast<std::vector<std::string>>(&a)) return *list;
  return std::nullopt;
}
}  // namespace

std::vector<std::string> effective_args(const po::variables_map& vm, const std::vector<std::string>& skip) {
  std::vector<std::string> out;
  for (const auto& [k, v] : vm) {
    if (v.empty() || v.defaulted()) continue;
    if (std::any_of(skip.begin(), skip.end(), [&](const std::string& s) { return k.rfind(s, 0) == 0; })) continue;
    const std::string key = "--" + k;
    if (auto* b = boost::any_cast<bool>(&v.value())) {  // a switch: given or not
      if (*b) out.push_back(key);
      continue;
    }
    const auto texts = value_texts(v.value());
    if (!texts) throw ConfigError(k + ": cannot pass this option on to the workers (unsupported type)");
    for (const auto& t : *texts) {
      // Boost refuses `--key=` ("should follow immediately after the equal sign"): an empty value goes as its own
      // word (a controller repeated from a config.ini, which gives `fail.at = `, had every worker stop on it).
      // Others keep the `=`, so that a value starting with '-' is not taken for an option.
      if (t.empty()) {
        out.push_back(key);
        out.push_back(t);
      } else {
        out.push_back(key + "=" + t);
      }
    }
  }
  return out;
}

std::string job_config(const po::variables_map& vm) {
  static const char* const kNotTheJobs[] = {"worker.", "controller.", "net.curve-", "process.", "fail.",
                                            "run.",    "quiet",       "runtime",    "out",      "config"};
  std::istringstream all(effective_config(vm));
  std::string out;
  for (std::string line; std::getline(all, line);) {
    if (line.empty() || line.front() == '#') continue;
    const auto key = line.substr(0, line.find(" = "));
    const bool skip = std::any_of(std::begin(kNotTheJobs), std::end(kNotTheJobs), [&](const char* p) {
      const std::string prefix = p;
      return prefix.back() == '.' || prefix.back() == '-' ? key.rfind(prefix, 0) == 0 : key == prefix;
    });
    if (!skip) out += line + '\n';
  }
  return out;
}

std::string effective_config(const po::variables_map& vm) {
  // What each key holds, as a job file reads it back (`run --config`): numbers exact, a list one line an element, an
  // alias's value under its primary name (the primary's default otherwise showed, and both keys were then refused).
  std::ostringstream s;
  for (const auto& [k, v] : vm) {
    if (v.empty()) continue;
    if (std::any_of(std::begin(kAliases), std::end(kAliases), [&](const Alias& a) { return k == a.alias; })) continue;
    // Where it was written from and to: a run repeated from the file would write over the first one's records.
    if (k == "out" || k == "config" || k == "help") continue;
    const auto* value = &v.value();
    for (const auto& a : kAliases) {
      if (k == a.primary && vm.count(a.alias) && !vm[a.alias].empty()) value = &vm[a.alias].value();
    }
    for (const auto& t : value_texts(*value).value_or(std::vector<std::string>{"?"})) {
      // A job file cuts a value at '#' and trims its spaces: such a value is noted, not given (a run repeated from
      // the file would have taken another one without a word).
      const bool keeps = t.find('#') == std::string::npos && (t.empty() || (t.front() != ' ' && t.back() != ' '));
      if (keeps) {
        s << k << " = " << t << '\n';
      } else {
        s << "# " << k << " = '" << t << "' " << kUnheldNote << "\n";
      }
    }
  }
  return s.str();
}

}  // namespace afs::cli
