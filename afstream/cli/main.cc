// The afstream program: the only layer that talks to people. Subcommands:
//   afstream run --job NAME [options]   run a job on the embedded local cluster (workers as threads)
//   afstream controller / worker        a job across hosts (tcp://)
//   afstream list                       jobs, operators and sources
//   afstream gen --job NAME --out FILE  the input a run would generate, as a file the job reads back
//   afstream backup-server [options]    serve a backup store (RocksDB or memory) to workers over ZeroMQ
//   afstream keygen --out DIR           a CURVE keypair for jobs across hosts (NAME.key, NAME.pub)
// Errors become one line on stderr and a non-zero exit status.
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "afstream/cli/options.h"
#include "afstream/core/errors.h"
#include "afstream/core/out_file.h"
#include "afstream/net/curve.h"
#include "afstream/net/endpoint.h"
#include "afstream/runtime/backup_server.h"
#include "afstream/runtime/file_source.h"
#include "afstream/runtime/fork_server.h"
#include "afstream/runtime/local_cluster.h"
#include "afstream/runtime/process_cluster.h"
#include "afstream/runtime/registration.h"
#include "afstream/runtime/spawn.h"
#include "afstream/runtime/supervisor.h"
#include "afstream/runtime/worker_process.h"
#include "afstream/store/memory_store.h"
#include "afstream/store/rocksdb_store.h"
#include "algorithms/distinct/distinct_job.h"
#include "algorithms/distinct/distinct_operators.h"
#include "algorithms/heavy_hitters/hh_job.h"
#include "algorithms/heavy_hitters/hh_operators.h"
#include "algorithms/join/join_job.h"
#include "algorithms/join/join_operators.h"
#include "algorithms/nexmark/nexmark_job.h"
#include "algorithms/nexmark/nexmark_source.h"
#include "algorithms/sinks/copy_job.h"
#include "algorithms/sinks/sink_operators.h"
#include "algorithms/text/text_jobs.h"
#include "algorithms/text/text_operators.h"
#include "git_revision.h"  // AFS_GIT_REVISION, written at every build (afstream/cli/git_revision.cmake)
#include "ml/learn_job.h"
#include "ml/learner_operator.h"
#include "ml/ps_job.h"
#include "ml/ps_operators.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

using afs::ConfigError;

std::map<std::string, afs::JobFactory> jobs() {
  return {{"heavy-hitters", &afs::hh::make_heavy_hitters_job},
          {"distinct", &afs::distinct::make_distinct_job},
          {"join", &afs::join::make_join_job},
          {"nexmark-hot-items", &afs::nexmark::make_hot_items_job},
          {"wordcount", &afs::text::make_wordcount_job},
          {"grep", &afs::text::make_grep_job},
          {"learn", &afs::ml::make_learn_job},
          {"ps", &afs::ml::make_ps_job},
          {"copy", &afs::sinks::make_copy_job}};
}

afs::Registry registry() {
  afs::Registry r;
  afs::register_builtin_sources(r);
  afs::hh::register_heavy_hitters(r);
  afs::distinct::register_distinct(r);
  afs::join::register_join(r);
  afs::nexmark::register_nexmark(r);
  afs::text::register_text(r);
  afs::ml::register_ml(r);
  afs::ml::register_ps(r);
  afs::sinks::register_sinks(r);
  return r;
}

// The `job = NAME` line of a job file, read by Boost as parse_run will read it ("" if none, or if the file cannot be
// read or parsed: parse_run then reports that file).
std::string job_in_config(const std::string& path) {
  std::ifstream f(path);
  if (!f) return "";
  try {
    for (const auto& o : po::parse_config_file(f, po::options_description(), true).options) {
      if (o.string_key == "job" && !o.value.empty()) return o.value.front();
    }
  } catch (const po::error&) {
  }
  return "";
}

// --job NAME on the command line, else the job a --config file names (the config.ini a run writes does: a run
// repeated from it, `afstream run --config DIR/config.ini`, was refused for the job's options).
std::string find_job_name(int argc, const char* const* argv) {
  std::string config;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--job" && i + 1 < argc) return argv[i + 1];
    if (a.rfind("--job=", 0) == 0) return a.substr(6);
    if (a == "--config" && i + 1 < argc) config = argv[i + 1];
    if (a.rfind("--config=", 0) == 0) config = a.substr(9);
  }
  return config.empty() ? "" : job_in_config(config);
}

// The job called name (nullptr for ""); ConfigError listing the jobs for an unknown name.
std::unique_ptr<afs::Job> job_named(const std::string& name) {
  if (name.empty()) return nullptr;
  const auto all_jobs = jobs();
  auto it = all_jobs.find(name);
  if (it == all_jobs.end()) {
    std::string known;
    for (const auto& [n, f] : all_jobs) known += (known.empty() ? "" : ", ") + n;
    throw ConfigError("job: unknown job '" + name + "' (known: " + known + ")");
  }
  return it->second();
}

// The job's own options, as --help lists them ("NAME options").
po::options_description job_options(const afs::Job& job) {
  po::options_description jo(job.name() + " options");
  job.add_options(jo);
  return jo;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// User + system CPU seconds of this process and of its reaped children (a process runtime's workers and backup
// server on this host; workers on other hosts are not counted). Taken around a run, it is the run's CPU time: on a
// shared machine a steadier measure of a mode's cost than wall time, whose rounds move by tens of percent.
double cpu_seconds() {
  double s = 0;
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage u{};
    if (getrusage(who, &u) != 0) continue;
    s += static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  }
  return s;
}

void usage() {
  std::cout
      << "usage: afstream <command> [options]\n\n"
         "commands:\n"
         "  run --job NAME [options]         run a job on the embedded local cluster\n"
         "  controller --job NAME [options]  run a job whose workers may run on other hosts (tcp://)\n"
         "  worker [options]                 one worker process (started by a controller, or by hand on\n"
         "                                   another host: --worker.id ID --worker.controller ENDPOINT)\n"
         "  list                             jobs, operators and sources\n"
         "  gen --job NAME --out FILE        write the input a run of the job would generate, as a file it\n"
         "                                   reads back (heavy-hitters and distinct: items; learn, ps: examples)\n"
         "  eval --eval.run DIR [options]    score the model a learn or ps run wrote on its held-out examples,\n"
         "                                   or on a test file (--learn.file F --eval.split all)\n"
         "  backup-server [options]          serve a backup store (RocksDB or memory) to workers over ZeroMQ\n"
         "  keygen --out DIR [--name NAME]   write a CURVE keypair (NAME.key, NAME.pub) for jobs across hosts\n"
         "  --version                        the source revision this binary was built from\n\n"
         "`afstream COMMAND --help` lists its options (`afstream run --job NAME --help`: and the job's).\n";
}

int cmd_list(int argc) {
  if (argc > 2) throw afs::ConfigError("list takes no options (afstream list)");
  std::cout << "jobs:\n";
  for (const auto& [name, make] : jobs()) {
    const auto job = make();
    std::cout << "  " << name << "  " << job->description() << "\n";
    if (job->writes_input()) std::cout << "      afstream gen writes its input as a file it reads back\n";
    if (job->evaluates_models()) std::cout << "      afstream eval scores the model it writes (model.csv)\n";
    const auto defaults = job->run_defaults();
    if (defaults.empty()) continue;
    std::cout << "      run defaults:";
    for (const auto& [key, value] : defaults) std::cout << " --" << key << " " << value;
    std::cout << "\n";
  }
  auto r = registry();
  std::cout << "operators:\n";
  for (const auto& [n, d] : r.operator_names()) std::cout << "  " << n << "  " << d << "\n";
  std::cout << "sources:\n";
  for (const auto& [n, d] : r.source_names()) std::cout << "  " << n << "  " << d << "\n";
  return 0;
}

// Set by SIGTERM / SIGINT: the backup server finishes the request in hand, closes its store and exits.
std::atomic<bool> g_stop_backup_server{false};
// Set by afs::parent_death_signal(): the controller that started it has ended (afs::spawn: PR_SET_PDEATHSIG).
std::atomic<bool> g_backup_server_orphaned{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");
extern "C" void stop_backup_server(int sig) {
  if (sig != SIGTERM && sig != SIGINT) g_backup_server_orphaned.store(true);
  g_stop_backup_server.store(true);
}

int cmd_backup_server(int argc, const char* const* argv) {
  po::variables_map vm;
  const auto args = afs::cli::parse_backup_server(argc, argv, vm);
  if (vm.count("help")) {
    std::cout << "usage: afstream backup-server [--listen ENDPOINT] [--store rocksdb --store.path DIR | --store memory]"
                 "\n\n"
              << afs::cli::backup_server_options() << "\n";
    return 0;
  }
  // Handlers first, so that a signal arriving once the ready line is out always stops the server cleanly. No
  // SA_RESTART: the server's poll returns at once and looks at the flag.
  struct sigaction sa {};
  sa.sa_handler = stop_backup_server;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(afs::parent_death_signal(), &sa, nullptr);

  std::unique_ptr<afs::BackupStore> store;
  std::string what;
  if (args.store == "memory") {
    store = std::make_unique<afs::MemoryStore>();
    what = "memory";
  } else {
    store = std::make_unique<afs::RocksDbStore>(args.store_path, afs::RocksDbStoreOptions{args.store_sync});
    what = "rocksdb " + args.store_path + (args.store_sync ? " (sync)" : "");
  }
  afs::BackupServerOptions server_options;
  server_options.curve = args.curve.config;
  server_options.local_dir = args.local_dir;
  server_options.on_refused = [](const afs::ZapRefusal& r) {
    std::cerr << "afstream backup-server: refused a connection from " << r.address << ": its key " << r.key
              << " is not in net.curve-authorized" << std::endl;
  };
  // Compaction rebuilds operators with this program's registry (the operators of every built-in job).
  const afs::Registry ops = registry();
  if (args.compact_ratio > 0) {
    server_options.make_operator = [&ops](const afs::OperatorSpec& spec) {
      return ops.make_operator(spec.kind, spec.params, {spec.index, spec.parallelism});
    };
    server_options.compaction = {args.compact_ratio, args.compact_deltas};
    server_options.on_compaction_error = [](int worker, const std::string& reason) {
      std::cerr << "afstream backup-server: state chain of worker " << worker << " left uncompacted: " << reason
                << std::endl;
    };
  }
  std::optional<afs::BackupServer> serving(std::in_place, args.listen, std::move(store), server_options);
  auto& server = *serving;
  if (!args.quiet) std::cerr << "afstream backup-server: store " << what << "\n";
  if (args.curve.config) {  // also when quiet: whether the store is protected, and by which key
    std::cerr << "afstream backup-server: CURVE "
              << (afs::net::is_tcp(server.bound_endpoint()) ? "on" : "off (it applies to tcp:// only)")
              << ", public key " << args.curve.config->keys.public_key << ", " << args.curve.config->authorized.size()
              << " keys let in\n";
  }
  if (!args.quiet) std::cerr << "afstream backup-server: listening on " << server.bound_endpoint() << std::endl;
  if (!args.endpoint_file.empty()) {
    // Written whole, then renamed: a reader never sees half an endpoint.
    const auto tmp = args.endpoint_file + ".tmp";
    {
      std::ofstream f(tmp);
      f << server.bound_endpoint() << "\n";
      afs::close_checked(f, tmp);
    }
    std::error_code ec;
    fs::rename(tmp, args.endpoint_file, ec);
    if (ec) throw afs::InputError("endpoint-file: cannot write '" + args.endpoint_file + "': " + ec.message());
  }
  server.run(g_stop_backup_server);
  // Its report, also when quiet (a run's own report is printed with --quiet too).
  const auto c = server.counters();
  std::cerr << "afstream backup-server: stopped after " << c.requests << " requests (" << c.bad_frames
            << " bad frames, " << c.duplicates << " duplicates, " << c.store_errors << " store errors, "
            << c.unroutable_replies << " unroutable replies, " << c.stale_incarnations << " from stale incarnations, "
            << c.unauthorized_connections << " connections refused for their key); " << c.chains_held
            << " state chains restored from their workers' own copies, " << c.puts_from_copies
            << " state records read from them (" << c.copies_refused << " refused)" << std::endl;
  const auto k = server.compactor_counters();
  std::cerr << "afstream backup-server: " << k.compactions << " chain compactions (" << k.records_merged << " records, "
            << k.bytes_read << " bytes into " << k.bytes_written << "), " << k.superseded << " superseded, "
            << k.unknown + k.failures << " chains left alone, " << k.left_to_worker
            << " left to their workers (deltas applied by replay)" << std::endl;
  // Stopped because its controller was killed (afs::spawn: parent_death_signal()): nobody else will remove the run's
  // private directories.
  if (!args.remove_if_orphaned.empty() && g_backup_server_orphaned.load()) {
    serving.reset();  // the server, then the store (RocksDB: flushed and closed) first
    for (const auto& d : args.remove_if_orphaned) {
      std::error_code ec;
      fs::remove_all(d, ec);
      std::cerr << "afstream backup-server: its controller is gone: removed " << d
                << (ec ? " (failed: " + ec.message() + ")" : std::string()) << std::endl;
    }
  }
  return 0;  // the server, then the store (RocksDB: flushed and closed), are destroyed on the way out
}

// Appends one run's row to a summary.csv. Runs of several jobs or modes may share a directory and differ in their
// columns (each job's scores, checkpoint mode's metrics): a file whose header lacks some of this row's columns is
// rewritten (beside it, then renamed) under the union of the columns, the cells a row does not have left empty, so
// that every value stays under its own name (a checkpoint-mode row added to other modes' file had 30 values under a
// 23-column header, and its scores were read from the wrong columns).
void append_summary_row(const std::string& path, const std::vector<std::string>& cols,
                        std::map<std::string, std::string>& row) {
  const auto split = [](const std::string& line) {
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream in(line);
    while (std::getline(in, cell, ',')) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    return cells;
  };
  const auto join = [](const std::vector<std::string>& cells) {
    std::string line;
    for (std::size_t i = 0; i < cells.size(); ++i) line += (i ? "," : "") + cells[i];
    return line + "\n";
  };
  std::vector<std::string> header;
  std::vector<std::string> lines;
  if (std::ifstream in(path); in) {
    std::string line;
    if (std::getline(in, line)) header = split(line);
    while (std::getline(in, line)) lines.push_back(line);
  }
  if (header.empty()) {
    std::ofstream f(path, std::ios::trunc);
    f << join(cols);
    std::vector<std::string> cells;
    for (const auto& c : cols) cells.push_back(row[c]);
    f << join(cells);
    afs::close_checked(f, path);
    return;
  }
  std::vector<std::string> merged = header;
  for (const auto& c : cols) {
    if (std::find(merged.begin(), merged.end(), c) == merged.end()) merged.push_back(c);
  }
  std::vector<std::string> cells;
  for (const auto& c : merged) cells.push_back(row.count(c) ? row[c] : "");
  if (merged.size() == header.size()) {  // the file's columns hold this row's: append under them
    std::ofstream f(path, std::ios::app);
    f << join(cells);
    afs::close_checked(f, path);
    return;
  }
  const std::string part = path + ".part-" + std::to_string(::getpid());
  {
    std::ofstream f(part, std::ios::trunc);
    f << join(merged);
    for (const auto& line : lines) {
      auto old = split(line);
      old.resize(merged.size());
      f << join(old);
    }
    f << join(cells);
    afs::close_checked(f, part);
  }
  fs::rename(part, path);
}

// Set by SIGINT / SIGTERM / SIGHUP during a run on worker processes (ProcessClusterOptions::stop_signal).
std::atomic<int> g_run_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "set from a signal handler");
extern "C" void note_run_signal(int sig) { g_run_signal.store(sig); }

// `run`, and `controller` (controller true): the same job, with the process runtime's controller on tcp:// and
// workers that may be on other hosts.
int cmd_run(int argc, const char* const* argv, bool controller) {
  const char* const name = controller ? "afstream controller" : "afstream run";
  auto job = job_named(find_job_name(argc, argv));
  po::variables_map vm;
  const auto controller_desc = afs::cli::controller_options();
  auto opts = afs::cli::parse_run(argc, argv, job.get(), vm, controller ? &controller_desc : nullptr);
  if (vm.count("help")) {
    // The controller's help leaves out --runtime, which it refuses unless it says processes.
    po::options_description desc("run options");
    const auto run = afs::cli::run_options();
    for (const auto& o : run.options()) {
      if (!controller || o->long_name() != "runtime") desc.add(o);
    }
    if (controller) desc.add(controller_desc);
    if (job) desc.add(job_options(*job));
    std::cout << "usage: " << name << " --job NAME [options]\n\n";
    if (controller) std::cout << "The controller always runs worker processes.\n\n";
    // The defaults below are the general ones; a job's own replace them (Job::run_defaults, apply_run_defaults).
    if (job && !job->run_defaults().empty()) {
      std::cout << "Defaults of job " << job->name() << ", in place of the general ones shown below unless given:\n";
      for (const auto& [key, value] : job->run_defaults()) std::cout << "  --" << key << " " << value << "\n";
      std::cout << "\n";
    }
    std::cout << desc << "\n";
    return 0;
  }
  if (!job) throw ConfigError("job: missing --job (try `afstream list`)");
  if (controller) {
    if (!vm["runtime"].defaulted() && opts.runtime != "processes") {
      throw ConfigError("runtime: afstream controller runs worker processes (leave --runtime out)");
    }
    opts.runtime = "processes";
    vm.at("runtime").value() = std::string("processes");  // so the printed and saved configuration says so
  }

  const auto reg = registry();
  auto& cfg = opts.config;
  const auto topology = job->topology(vm, cfg);
  cfg.job_id = job->name() + "-" + std::to_string(::getpid());
  if (opts.fail_count > 0 || opts.fail_random > 0 || !opts.fail_at.empty()) {
    const auto targets = afs::parse_worker_list(opts.fail_target, topology.worker_count(), opts.fail_domains);
    const auto total = job->total_items();
    if (!opts.fail_at.empty()) cfg.failures = afs::parse_failure_points(opts.fail_at, total, targets);
    for (auto& e : afs::spread_failures(opts.fail_count, total, targets)) cfg.failures.push_back(std::move(e));
    for (auto& e : afs::random_failures(opts.fail_random, total, targets, opts.seed))
      cfg.failures.push_back(std::move(e));
  }
  // The controller's options, checked before anything is printed or started (bad input is one line).
  std::optional<afs::cli::ControllerArgs> controller_args;
  if (controller) controller_args = afs::cli::parse_controller(vm, topology.worker_count());

  for (const auto& o : opts.unused_by_mode) {
    std::cerr << name << ": note: " << o << " has no effect in ft.mode " << afs::to_string(cfg.mode) << "\n";
  }
  for (const auto& o : opts.unused_by_job) std::cerr << name << ": note: " << o << "\n";
  for (const auto& o : job->cautions()) std::cerr << name << ": note: " << o << "\n";
  for (const auto& o : opts.unused_by_runtime) std::cerr << name << ": note: " << o << "\n";
  const auto effective = afs::cli::effective_config(vm);
  // The run directory first: an --out that cannot be one is one line, before the configuration is printed.
  std::ofstream metrics;
  if (!opts.out_dir.empty()) {
    std::error_code ec;
    fs::create_directories(opts.out_dir, ec);
    if (ec) throw afs::InputError("out: cannot create directory '" + opts.out_dir + "': " + ec.message());
    {
      std::ofstream f(opts.out_dir + "/config.ini");
      f << afs::cli::run_config_file(effective);
      afs::close_checked(f, opts.out_dir + "/config.ini");
    }
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    {
      std::ofstream f(opts.out_dir + "/meta.json");
      f << "{\"git_revision\": \"" << AFS_GIT_REVISION << "\", \"seed\": " << opts.seed << ", \"host\": \"" << host
        << "\", \"started\": " << std::time(nullptr) << "}\n";
      afs::close_checked(f, opts.out_dir + "/meta.json");
    }
    metrics.open(opts.out_dir + "/metrics.jsonl");
    if (!metrics) throw afs::InputError("out: cannot write '" + opts.out_dir + "/metrics.jsonl'");
  }

  // Printed at the start (DESIGN 7); with --quiet and --out, where it is kept, one line says where (scripts that pass
  // stderr through showed about 60 lines per run).
  if (opts.quiet && !opts.out_dir.empty()) {
    std::cerr << name << ": effective configuration in " << opts.out_dir << "/config.ini\n";
  } else {
    std::cerr << name << ": effective configuration\n" << effective;
  }
  std::cerr << "topology: " << topology.worker_count() << " workers (";
  for (std::size_t s = 0; s < topology.stages().size(); ++s) {
    const auto& st = topology.stages()[s];
    std::cerr << (s ? ", " : "") << st.name << " x" << st.parallelism << " [" << topology.first_worker(s) << ".."
              << topology.first_worker(s) + st.parallelism - 1 << "]";
  }
  std::cerr << ")\n";

  std::unique_ptr<afs::Cluster> cluster_ptr;
  std::vector<std::pair<int, struct sigaction>> run_signal_handlers;  // replaced during a run on processes (below)
  if (opts.runtime == "processes") {
    afs::ProcessClusterOptions popts;
    popts.program = fs::read_symlink("/proc/self/exe").string();
    // The job's options, as given to run, but the run's origin of time: it gets its own below.
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--run.started-ns") {
        ++i;
      } else if (!a.starts_with("--run.started-ns=")) {
        popts.worker_args.push_back(a);
      }
    }
    popts.store = opts.process_store;
    popts.store_compact_ratio = opts.process_store_compact_ratio;
    popts.store_quiet = opts.quiet;
    popts.standby = opts.process_standby;
    popts.fork_server = opts.process_fork_server;
    popts.local_recovery = opts.process_local_recovery;
    popts.heartbeat = std::chrono::milliseconds(opts.heartbeat_ms);
    popts.heartbeat_timeout = std::chrono::milliseconds(opts.heartbeat_timeout_ms);
    popts.start_timeout = std::chrono::milliseconds(opts.start_timeout_ms);
    popts.on_backup_server_restart = [](const std::string& how) {
      std::cerr << "afstream: the backup server ended, " << how
                << "; restarting it on its directory (what it acknowledged is on disk)" << std::endl;
    };
    if (controller) {
      const auto& c = *controller_args;
      popts.bind = c.bind;
      popts.remote_workers = c.remote_workers;
      popts.backup_server = c.backup_server;
      popts.register_timeout = std::chrono::milliseconds(c.register_timeout_ms);
      popts.job_config = afs::cli::job_config(vm);
      // The job's options as given (on the command line or in a job file), so that a worker on another host needs
      // no copy of the job file. Not the CURVE key files: each host has its own (the workers started here get the
      // controller's, popts.curve_args).
      popts.worker_args =
          afs::cli::effective_args(vm, {"controller.", "config", "help", "out", "net.curve-", "run.started-ns"});
      popts.curve = opts.curve.config;
      popts.curve_args = opts.curve.args;
      popts.backup_server_key = c.backup_server_key;
      popts.on_remote_down = [](int w, const std::string& why, const std::string& start) {
        std::cerr << "afstream controller: remote worker " << w << " " << why
                  << "; waiting for it to register again (a worker started with --worker.restart "
                     "is restarted on its host; else start it there: "
                  << start << ")" << std::endl;
      };
      popts.on_refused = [](const afs::ZapRefusal& r) {
        std::cerr << "afstream controller: refused a connection from " << r.address << ": its key " << r.key
                  << " is not in net.curve-authorized" << std::endl;
      };
      std::vector<int> local;
      for (int w = 0; w < topology.worker_count(); ++w) {
        if (std::find(c.remote_workers.begin(), c.remote_workers.end(), w) == c.remote_workers.end()) {
          local.push_back(w);
        }
      }
      popts.on_ready = [local, remote = c.remote_workers](const afs::ControllerEndpoints& e) {
        auto ids = [](const std::vector<int>& v) {
          std::string s;
          for (int w : v) s += (s.empty() ? "" : ",") + std::to_string(w);
          return s.empty() ? std::string("none") : s;
        };
        std::cerr << "afstream controller: reports on " << e.reports << ", directory on " << e.directory
                  << ", backup server on " << e.store << "\n";
        if (!e.key.empty()) {
          std::cerr << "afstream controller: CURVE on, public key '" << e.key << "' (backup server '" << e.store_key
                    << "')\n";
        }
        std::cerr << "afstream controller: starting workers " << ids(local) << " here; waiting for remote workers "
                  << ids(remote) << "\n";
        if (!remote.empty()) {
          std::cerr << "afstream controller: start each remote worker on its host with:\n  afstream worker "
                       "--worker.id ID --worker.controller "
                    << e.reports << " --worker.bind tcp://ITS_IP";
          if (!e.key.empty()) {
            // Quoted: Z85 keys hold characters the shell would take ($, &, <, >, *, ...), never a quote.
            std::cerr << " --net.curve-secret ITS.key --net.curve-authorized DIR --worker.controller-key='" << e.key
                      << "'";
          }
          std::cerr << " --worker.restart\n";
        }
        std::cerr << std::flush;
      };
    }
    // One origin for the times workers measure from the start, restarted incarnations included (RunConfig::
    // started_ns): every worker process gets this process's (taken now, or as given; a 0 given, as a run's
    // config.ini gives it, means now too).
    popts.worker_args.push_back("--run.started-ns=" + std::to_string(cfg.started_ns));
    // A signal that would end the run stops it instead, so that its processes are stopped and its private
    // directories removed (~ProcessCluster); then it ends the run as it would have. One the user set to be ignored
    // stays ignored.
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction now {};
      if (::sigaction(sig, nullptr, &now) == 0 && now.sa_handler == SIG_IGN) continue;
      struct sigaction sa {};
      sa.sa_handler = note_run_signal;
      sa.sa_flags = SA_RESTART;
      sigemptyset(&sa.sa_mask);
      struct sigaction before {};
      sigaction(sig, &sa, &before);
      run_signal_handlers.emplace_back(sig, before);
    }
    popts.stop_signal = &g_run_signal;
    cluster_ptr = std::make_unique<afs::ProcessCluster>(topology, reg, cfg, popts);
  } else {
    cluster_ptr = std::make_unique<afs::LocalCluster>(topology, reg, cfg);
  }
  afs::Cluster& cluster = *cluster_ptr;
  const auto t_start = std::chrono::steady_clock::now();
  auto on_sample = [&](const afs::MetricsSample& m) {
    if (metrics) {
      metrics << "{\"t\": " << m.t << ", \"source_items\": " << m.source_items << ", \"items_per_s\": " << m.items_per_s
              << ", \"input_items\": " << m.input_items << ", \"input_per_s\": " << m.input_per_s
              << ", \"items_out\": " << m.items_out << ", \"state_backups\": " << m.state_backups
              << ", \"item_backups\": " << m.item_backups << ", \"backup_bytes\": " << m.backup_bytes
              << ", \"divergence\": " << m.divergence << ", \"unbacked\": " << m.unbacked
              << ", \"unacked\": " << m.unacked << ", \"failures\": " << m.failures
              << ", \"last_recovery_ms\": " << m.last_recovery_ms << ", \"store_bytes\": " << m.store_bytes
              << ", \"unauthorized_connections\": " << m.unauthorized_connections
              << ", \"trees_replayed\": " << m.trees_replayed << "}\n";
      // Each sample as it is taken: the file is read while the run goes on, and a run stopped by a signal (Ctrl-C,
      // timeout) ends without closing it. Buffered, it stayed empty for the first 25 or so seconds, and so after such
      // a stop: what was said there, such as unauthorized_connections while a job stalled, was lost.
      metrics.flush();
    }
    if (!opts.quiet && m.t >= 1.0) {
      std::fprintf(stderr, "[%6.1fs] %5.1f%%  %9.3g items/s  backups %llu state / %llu items (%.1f MB)  failures %llu",
                   m.t, 100.0 * static_cast<double>(m.input_items) / static_cast<double>(job->total_items()),
                   m.input_per_s, static_cast<unsigned long long>(m.state_backups),
                   static_cast<unsigned long long>(m.item_backups), static_cast<double>(m.backup_bytes) / 1e6,
                   static_cast<unsigned long long>(m.failures));
      if (m.trees_replayed > 0) {
        std::fprintf(stderr, "  trees replayed %llu", static_cast<unsigned long long>(m.trees_replayed));
      }
      std::fputc('\n', stderr);
    }
  };
  const double cpu_start = cpu_seconds();
  // After the run the replaced handlers are back, and a signal that came during it (it stopped the run, or came too
  // late to) ends the program as it would have, once the processes are stopped and the directories removed.
  const auto end_run_signals = [&] {
    for (const auto& [sig, before] : run_signal_handlers) sigaction(sig, &before, nullptr);
    run_signal_handlers.clear();
    if (const int sig = g_run_signal.load()) {
      cluster_ptr.reset();
      ::raise(sig);
      std::_Exit(128 + sig);  // a handler of its own that returned: the cluster is gone, so is the run
    }
  };
  const auto result = [&] {
    try {
      auto r = cluster.run(on_sample, std::chrono::milliseconds(1000));
      end_run_signals();
      return r;
    } catch (...) {
      end_run_signals();
      throw;
    }
  }();
  const double cpu_s = cpu_seconds() - cpu_start;
  (void)t_start;
  const auto scores = job->evaluate(cluster, topology, opts.out_dir);

  std::vector<double> rec;
  for (const auto& f : result.failures) {
    if (f.recovered) rec.push_back(f.recovery_ms);  // failures whose recovery was cut short have none
  }
  const double items_per_s = static_cast<double>(result.source_items) / result.seconds;

  std::map<std::string, std::string> row;
  std::vector<std::string> cols = {"job",
                                   "mode",
                                   "theta",
                                   "l",
                                   "gamma",
                                   "failures",
                                   "items",
                                   "seconds",
                                   "items_per_s",
                                   "state_backups",
                                   "item_backups",
                                   "backup_bytes",
                                   "recovery_ms_median",
                                   "trees_replayed",
                                   "latency_p50_ms",
                                   "latency_p99_ms",
                                   "cpu_s",
                                   "failures_fired"};
  auto num = [](double v) {  // 10 significant digits: counts (items, bytes, exact join sizes) stay whole
    char b[64];
    std::snprintf(b, sizeof b, "%.10g", v);
    return std::string(b);
  };
  row["job"] = job->name();
  row["mode"] = afs::to_string(cfg.mode);
  // The thresholds where they apply: mode approx (the other modes' rows had the unused defaults, 1e5 / 1e3 / 1e3).
  const bool approx = cfg.mode == afs::FtMode::Approx;
  row["theta"] = approx ? num(cfg.bounds.theta) : "";
  row["l"] = approx ? num(cfg.bounds.l) : "";
  row["gamma"] = approx ? num(cfg.bounds.gamma) : "";
  row["failures"] = std::to_string(cfg.failures.size());
  row["failures_fired"] = std::to_string(result.failure_events);
  row["items"] = std::to_string(result.source_items);
  row["seconds"] = num(result.seconds);
  row["items_per_s"] = num(items_per_s);
  row["state_backups"] = std::to_string(result.state_backups);
  row["item_backups"] = std::to_string(result.item_backups);
  row["backup_bytes"] = std::to_string(result.backup_bytes);
  row["recovery_ms_median"] = num(median(rec));
  row["trees_replayed"] = std::to_string(result.trees_replayed);
  row["latency_p50_ms"] = num(afs::latency_quantile_ms(result.latency_buckets, 0.5));
  row["latency_p99_ms"] = num(afs::latency_quantile_ms(result.latency_buckets, 0.99));
  row["cpu_s"] = num(cpu_s);
  if (cfg.mode == afs::FtMode::Checkpoint) {  // checkpoint mode's own metrics (RunResult)
    const std::pair<const char*, std::string> ckpt[] = {
        {"checkpoints", std::to_string(result.checkpoints)},
        {"checkpoints_abandoned", std::to_string(result.checkpoints_abandoned)},
        {"checkpoint_ms_mean", num(result.checkpoint_ms_mean)},
        {"checkpoint_ms_max", num(result.checkpoint_ms_max)},
        {"checkpoint_bytes", std::to_string(result.checkpoint_bytes)},
        {"alignment_ms_mean", num(result.alignment_ms_mean)},
        {"alignment_ms_max", num(result.alignment_ms_max)}};
    for (const auto& [k, v] : ckpt) {
      cols.push_back(k);
      row[k] = v;
    }
  }
  for (const auto& [k, v] : scores) {
    cols.push_back(k);
    row[k] = num(v);
  }

  std::cout << "job " << job->name() << ", mode " << row["mode"] << ", " << cfg.failures.size() << " failure points";
  if (result.failure_events != cfg.failures.size()) {
    std::cout << " (" << result.failure_events
              << " fired: the run ended, or their workers finished, while the others waited for restarting ones)";
  }
  std::cout << ", " << result.failures.size() << " worker recoveries\n";
  std::cout << "  " << result.source_items << " items in " << num(result.seconds) << " s = " << num(items_per_s)
            << " items/s; backups: " << result.state_backups << " state, " << result.item_backups << " item, "
            << num(static_cast<double>(result.backup_bytes) / 1e6) << " MB\n";
  if (cfg.mode == afs::FtMode::Checkpoint) {
    std::cout << "  checkpoints: " << result.checkpoints << " complete (" << result.checkpoints_abandoned
              << " abandoned), duration mean " << num(result.checkpoint_ms_mean) << " ms, max "
              << num(result.checkpoint_ms_max) << " ms, " << num(static_cast<double>(result.checkpoint_bytes) / 1e6)
              << " MB; alignment mean " << num(result.alignment_ms_mean) << " ms, max " << num(result.alignment_ms_max)
              << " ms\n";
  }
  std::cout << "  delivery: " << result.duplicates_dropped << " duplicates dropped, " << result.gaps
            << " items never received (gaps), " << result.bad_messages << " bad messages";
  if (result.outputs_after_end > 0) {
    std::cout << ", " << result.outputs_after_end << " outputs dropped (emitted after their end of stream went out)";
  }
  std::cout << "\n";
  if (controller && opts.curve.config) {
    std::cout << "  security: CURVE on tcp, " << result.unauthorized_connections
              << " connections refused (key not in net.curve-authorized)\n";
  }
  if (!rec.empty())
    std::cout << "  recovery: median " << num(median(rec)) << " ms over " << rec.size() << " recoveries\n";
  if (cfg.mode == afs::FtMode::None && !result.failures.empty()) {
    // The results below are of what the restarted workers saw: a model or sketch that starts again from nothing.
    // Counted at the crash on threads; a worker process keeps no progress page in mode none, so its are unknown.
    std::uint64_t lost = 0;
    for (const auto& f : result.failures) lost += f.lost_items;
    std::cout << "  mode none: nothing restored; the " << result.failures.size()
              << " failed workers lost their state and the items they held";
    if (opts.runtime == "threads") std::cout << " (" << lost << ", failures.csv lost_items)";
    std::cout << "\n";
  }
  if (const auto* pc = dynamic_cast<const afs::ProcessCluster*>(&cluster)) {
    const auto info = pc->info();
    if (opts.process_standby > 0) {
      std::cout << "  standby: " << info.standbys_started << " spare processes started, " << info.standby_takeovers
                << " of " << result.failures.size() << " failed workers taken over by one\n";
    }
    if (info.backup_server_restarts > 0) {
      std::cout << "  backup server: " << info.backup_server_restarts << " restarts\n";
    }
    if (opts.process_fork_server && !result.failures.empty()) {
      std::cout << "  fork server: " << info.forked_restarts << " of " << result.failures.size()
                << " failed workers restarted through it\n";
    }
  }
  std::cout << " ";
  for (const auto& [k, v] : scores) std::cout << " " << k << " " << num(v);
  std::cout << "\n";

  if (!opts.out_dir.empty()) {
    afs::close_checked(metrics, opts.out_dir + "/metrics.jsonl");
    append_summary_row(opts.out_dir + "/summary.csv", cols, row);
    std::ofstream ff(opts.out_dir + "/failures.csv");
    ff << "worker,failure_count,at_items,theta,l,gamma,divergence_at_crash,lost_items,lost_outputs,replayed_items,"
          "repeated_items,missing_items,residual,detect_ms,restore_ms,replay_ms,recovery_ms,first_item_ms,"
          "caught_up_ms,recovered,alpha\n";
    for (const auto& r : result.failures) {
      ff << r.worker << ',' << r.failure_count << ',' << r.at_items << ',';
      if (approx)
        ff << r.theta << ',' << r.l << ',' << r.gamma;  // the thresholds, halved per failure
      else
        ff << ",,";
      ff << ',' << r.divergence_at_crash << ',' << r.lost_items << ',' << r.lost_outputs << ',' << r.replayed_items
         << ',' << r.repeated_items << ',' << r.missing_items << ',' << r.residual << ',' << r.detect_ms << ','
         << r.restore_ms << ',' << r.replay_ms << ',' << r.recovery_ms << ',' << r.first_item_ms << ','
         << r.caught_up_ms << ',' << (r.recovered ? 1 : 0) << ',';
      if (approx) ff << r.alpha;  // the operator's alpha then: with theta below it the worker logged every item
      ff << '\n';
    }
    afs::close_checked(ff, opts.out_dir + "/failures.csv");
  }
  // The summary on standard output is a result too (>/dev/full lost it with exit status 0).
  std::cout.flush();
  if (!std::cout)
    throw afs::RuntimeError(std::string("cannot write the summary to standard output: ") + std::strerror(errno));
  return 0;
}

}  // namespace

// Set by SIGTERM / SIGINT: the supervisor of `worker --worker.restart` stops its worker and exits.
std::atomic<bool> g_stop_supervisor{false};
extern "C" void stop_supervisor(int) { g_stop_supervisor.store(true); }

// One worker process: the same job options as run, plus the worker.* ones its controller passes. Errors name what
// was wrong, on one line (main), and the exit status is non-zero.
int run_worker(int argc, const char* const* argv) {
  const auto all_jobs = jobs();
  const auto job_name = find_job_name(argc, argv);
  auto it = all_jobs.find(job_name);
  if (it == all_jobs.end()) throw ConfigError("worker: missing or unknown --job '" + job_name + "'");
  auto job = it->second();
  po::variables_map vm;
  const auto extra = afs::cli::worker_options();
  auto opts = afs::cli::parse_run(argc, argv, job.get(), vm, &extra);
  if (vm["worker.restart"].as<bool>()) {
    throw ConfigError(
        "worker.restart: only for a worker that registers (no --job): each new process must get its "
        "incarnation from the controller");
  }
  auto wopts = afs::cli::parse_worker(vm);
  wopts.curve = opts.curve.config;
  wopts.job_config = afs::cli::job_config(vm);
  // Killed by the controller's failure plan (a worker on another host): die as a SIGKILLed process does.
  wopts.on_killed = [] { ::raise(SIGKILL); };
  // Said at once: a peer refused here sends nothing, and the job would stall without a word.
  wopts.on_refused = [&wopts](const afs::ZapRefusal& r) {
    std::cerr << "afstream worker: worker " << wopts.worker << " refused a connection from " << r.address
              << ": its key " << r.key << " is not in net.curve-authorized" << std::endl;
  };
  const auto reg = registry();
  const auto topology = job->topology(vm, opts.config);
  // A fork server or a spare holds the job's sources built once, for as long as this function runs: its forked
  // workers and its takeover inherit what they share (a Zipf source's table) instead of building it again.
  std::vector<std::unique_ptr<afs::Source>> prebuilt;
  if (vm["worker.fork-server"].as<bool>() || vm.count("worker.standby")) {
    prebuilt = afs::prebuild_sources(topology, reg);
  }
  if (vm["worker.fork-server"].as<bool>()) {
    // A fork server: the job is built; each request forks a worker process, which goes on from here as that worker.
    afs::check_server_keys(wopts);
    const auto request = afs::serve_forks();
    if (!request) return 0;  // the controller closed its end: the job is over
    wopts.worker = request->worker;
    wopts.epoch = request->epoch;
    wopts.failures = request->failures;
  } else if (vm.count("worker.standby")) {
    // A spare process: the job is built; wait to be told which failed worker this process is to be.
    afs::check_server_keys(wopts);
    std::optional<afs::net::CurveClient> client;
    if (wopts.curve && afs::net::is_tcp(wopts.controller)) {
      client = afs::net::CurveClient{wopts.curve->keys, wopts.controller_key};
    }
    const auto a = afs::await_assignment(vm["worker.standby"].as<int>(), wopts.controller, wopts.directory,
                                         wopts.controller_timeout, client);
    wopts.worker = static_cast<int>(a.worker);
    wopts.epoch = a.epoch;
    wopts.failures = a.failures;
  }
  afs::run_worker_process(topology, reg, opts.config, wopts);
  return 0;
}

// A worker started by hand (no --job): registers with its controller, which says which incarnation it is and what
// the job is, then runs as a worker started by the controller would.
int run_registering_worker(int argc, const char* const* argv) {
  const auto r = afs::cli::parse_registering_worker(argc, argv);
  const auto a = afs::register_worker(r.worker, r.controller, r.controller_timeout, r.curve);
  std::vector<std::string> args{"worker"};
  args.insert(args.end(), a.job_args.begin(), a.job_args.end());
  args.insert(args.end(), r.given.begin(), r.given.end());
  std::string failures;
  for (auto f : a.failures) failures += (failures.empty() ? "" : ",") + std::to_string(f);
  args.insert(args.end(), {"--worker.epoch", std::to_string(a.epoch), "--worker.failures", failures});
  if (!r.has_bind) args.insert(args.end(), {"--worker.bind", "tcp://127.0.0.1"});
  if (!r.has_directory) args.insert(args.end(), {"--worker.directory", a.directory});
  if (!r.has_store) args.insert(args.end(), {"--worker.store", a.store});
  if (!r.has_heartbeat) args.insert(args.end(), {"--worker.heartbeat-ms", std::to_string(a.heartbeat_ms)});
  if (r.curve && !r.has_store_key && !a.store_key.empty()) args.push_back("--worker.store-key=" + a.store_key);
  std::cerr << "afstream worker: worker " << r.worker << " registered with " << r.controller << " as incarnation "
            << a.epoch << std::endl;
  std::vector<const char*> argv2;
  for (const auto& s : args) argv2.push_back(s.c_str());
  try {
    return run_worker(static_cast<int>(argv2.size()), argv2.data());
  } catch (const std::exception& e) {
    // An error before the worker process's first report (building the job, binding, its local-state directory)
    // would leave the controller waiting for that report (process.start-timeout-ms): tell it. One after it, the
    // worker process has reported already (the controller stops at the first); a replaced incarnation's is ignored.
    afs::report_failed(r.worker, a.epoch, r.controller, e.what(), r.curve);
    throw;
  }
}

// `worker --worker.restart`: this process supervises; the worker runs in a child started again whenever it dies.
int run_supervised_worker(int argc, const char* const* argv) {
  (void)afs::cli::parse_registering_worker(argc, argv);  // bad options: one error here, not one per restart
  if (!find_job_name(argc, argv).empty()) {
    throw ConfigError(
        "worker.restart: only for a worker that registers (no --job): each new process must get its "
        "incarnation from the controller");
  }
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) != "--worker.restart") args.emplace_back(argv[i]);
  }
  struct sigaction sa {};
  sa.sa_handler = stop_supervisor;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  afs::SupervisorOptions so;
  so.on_restart = [](const afs::SupervisorEvent& e) {
    std::cerr << "afstream worker: the worker process " << e.pid << " died of signal " << e.signal
              << "; started it again as process " << e.next << " (restart " << e.restarts << ")" << std::endl;
  };
  return afs::supervise(fs::read_symlink("/proc/self/exe").string(), args, g_stop_supervisor, so);
}

int cmd_worker(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << "usage: afstream worker --worker.id ID --worker.controller tcp://HOST:PORT [--worker.bind tcp://IP] "
                   "[--worker.restart]\n"
                   "       [--net.curve-secret FILE --net.curve-authorized DIR --worker.controller-key KEY]\n"
                   "       (a worker started by hand: registers, and gets the job from its controller)\n"
                   "   or: afstream worker --job NAME [job options] --worker.* ... (as a controller starts one)\n\n"
                << afs::cli::worker_options() << "\n"
                << afs::cli::curve_options() << "\n";
      return 0;
    }
    if (a == "--worker.restart") return run_supervised_worker(argc, argv);
  }
  if (find_job_name(argc, argv).empty()) return run_registering_worker(argc, argv);
  return run_worker(argc, argv);
}

// A word as a shell reads it back: quoted when it holds anything but letters, digits and _ . / : = + , -.
std::string shell_word(const std::string& w) {
  const bool plain = !w.empty() && std::all_of(w.begin(), w.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("_./:=+,-").find(c) != std::string_view::npos;
  });
  if (plain) return w;
  std::string q = "'";
  for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The part file `afstream gen` is writing, removed if a signal ends it; the signal then does what it would have done
// (the shell sees gen killed by it, and a loop of gens stops at Ctrl-C). Async-signal-safe: unlink, signal, raise.
char gen_part_file[4096];
extern "C" void remove_gen_part_and_reraise(int sig) {
  if (gen_part_file[0] != '\0') ::unlink(gen_part_file);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// Where gen writes for --out path: through a part file beside the file (the target of a symbolic link, followed)
// that is renamed over it once complete, so that a failed or interrupted gen leaves the file as it was; or, for
// anything else (a pipe, a device, /dev/stdout and /dev/fd/N, which stand for open descriptors), to the path itself,
// appending.
struct GenTarget {
  std::string file;  // what is finally written (the link's target for a link)
  bool via_part = true;
};
GenTarget gen_target(const std::string& path) {
  fs::path p = path;
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(p)); ++hops) {
    const fs::path to = fs::read_symlink(p);
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  const auto status = fs::symlink_status(p);
  if (fs::is_directory(status)) throw ConfigError("out: '" + path + "' is a directory (afstream gen writes one file)");
  const auto under = [&](const char* dir) { return path.rfind(dir, 0) == 0 || p.string().rfind(dir, 0) == 0; };
  const bool stands_for_a_descriptor = under("/dev/") || under("/proc/");
  if (stands_for_a_descriptor || (fs::exists(status) && !fs::is_regular_file(status))) return {path, false};
  return {p.string(), true};
}

// What a failed write of gen's output says: the option, the file and the system's reason when it gave one.
[[noreturn]] void throw_cannot_write(const std::string& path, int error) {
  const std::string where = path == "-" ? "standard output" : "'" + path + "'";
  throw afs::InputError("out: cannot write " + where + (error != 0 ? std::string(": ") + std::strerror(error) : ""));
}

// `afstream gen`: the input a run with the same options would generate (Job::write_input), written to a file the
// job reads back, and the options that run the job on that file. The run's options (ft.*, fail.*, net.*, the
// controller's, ...) are accepted and change nothing, so that a run's command line, or its config.ini (--config),
// serves as it is; the job's options are checked as a run checks them (Job::check_input).
int cmd_gen(int argc, const char* const* argv) {
  auto job = job_named(find_job_name(argc, argv));
  po::options_description gen_desc("gen options");
  gen_desc.add_options()(
      "gen.format", po::value<std::string>()->default_value(""),
      "the file's format: the job's own when empty (heavy-hitters, distinct: items, 'key,value' lines; "
      "learn and ps: libsvm for sparse data, csv for dense), or csv | libsvm for learn and ps");
  po::options_description accepted;
  accepted.add(gen_desc).add(afs::cli::controller_options());
  po::variables_map vm;
  const auto opts = afs::cli::parse_run(argc, argv, job.get(), vm, &accepted);
  std::string writers;
  for (const auto& [n, make] : jobs()) {
    if (make()->writes_input()) writers += (writers.empty() ? "" : ", ") + n;
  }
  if (vm.count("help")) {
    std::cout << "usage: afstream gen --job NAME [the job's options] [--items N] [--seed S] --out FILE "
                 "[--gen.format F] [--quiet] [--config FILE]\n"
                 "Writes the input a run with these options would generate (jobs: "
              << writers
              << ") to FILE (- for standard output), in a format the job reads back, and prints the options that run "
                 "the job on it. --items, --seed and the job's options say what is generated, as for afstream run; "
                 "--quiet leaves out the progress lines; --config FILE reads options from a job file. The other "
                 "options of afstream run (ft.*, fail.*, ...) are accepted and change nothing, so a run's command "
                 "line or its config.ini serves as it is.\n\n"
              << gen_desc << "\n";
    if (job) std::cout << job_options(*job) << "\n";
    return 0;
  }
  if (!job) throw ConfigError("job: missing --job (afstream gen writes the input of: " + writers + ")");
  if (!job->writes_input()) {
    throw ConfigError("job: " + job->name() + " reads no input file that afstream gen could write (it writes the " +
                      "input of: " + writers + ")");
  }
  const std::string path = opts.out_dir;
  if (path.empty()) throw ConfigError("out: missing --out FILE (the file to write; - for standard output)");
  const bool to_stdout = path == "-";
  const GenTarget target = to_stdout ? GenTarget{path, false} : gen_target(path);
  // Everything gen would refuse, refused before anything is opened: a refused gen touches no file.
  const std::string format = vm["gen.format"].as<std::string>();
  job->check_input(vm, format);
  const bool via_part = target.via_part;
  const std::string part = via_part ? target.file + ".part-" + std::to_string(::getpid()) : target.file;
  std::ofstream file;
  if (!to_stdout) {
    if (via_part) {
      if (part.size() >= sizeof gen_part_file) throw ConfigError("out: the path '" + path + "' is too long");
      std::copy(part.begin(), part.end(), gen_part_file);
      gen_part_file[part.size()] = '\0';
      // Signals that would end gen remove the part file first; one the user set to be ignored (nohup, a background
      // job's SIGINT) stays ignored.
      for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGXFSZ}) {
        struct sigaction now {};
        if (::sigaction(sig, nullptr, &now) == 0 && now.sa_handler == SIG_IGN) continue;
        ::signal(sig, remove_gen_part_and_reraise);
      }
    }
    errno = 0;
    file.open(part, std::ios::binary | (via_part ? std::ios::out | std::ios::trunc : std::ios::out | std::ios::app));
    if (!file) throw_cannot_write(path, errno);
  }
  std::ostream& out = to_stdout ? std::cout : file;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto next_line = start + std::chrono::seconds(1);
  const auto progress = [&](std::uint64_t written, std::uint64_t total) {
    if (opts.quiet) return;
    const auto now = Clock::now();
    if (now < next_line) return;
    next_line = now + std::chrono::seconds(1);
    std::cerr << "afstream gen: " << written << " / " << total << " records (" << (total ? 100 * written / total : 100)
              << "%)\n";
  };
  afs::WrittenInput w;
  try {
    errno = 0;
    try {
      w = job->write_input(vm, format, out, path, progress);
    } catch (const afs::InputError&) {
      if (!out) throw_cannot_write(path, errno);  // the stream failed: say why
      throw;
    }
    out.flush();
    if (!out) throw_cannot_write(path, errno);
    if (!to_stdout) {
      file.close();
      if (!file) throw_cannot_write(path, errno);
      if (via_part) fs::rename(part, target.file);
    }
  } catch (...) {
    if (via_part) {
      std::error_code ignored;
      fs::remove(part, ignored);
    }
    throw;
  }
  gen_part_file[0] = '\0';
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::cerr << "afstream gen: wrote " << w.records << " records (" << w.format << ") to "
            << (to_stdout ? "standard output" : path) << " in " << seconds << " s\n";
  if (!to_stdout) {
    std::string command = "afstream run --job " + job->name();
    for (const auto& a : w.read_back) command += " " + shell_word(a);
    std::cerr << "afstream gen: run the job on it with: " << command << " [its other options]\n";
  }
  return 0;
}

// `afstream eval`: a model a run wrote (the learners' model.csv), scored on data (Job::evaluate_model). --eval.run DIR
// stands for the run's job file and model: --config DIR/config.ini --eval.model DIR/model.csv.
int cmd_eval(int argc, const char* const* argv) {
  std::vector<std::string> args(argv, argv + argc);
  std::string run_dir;
  bool has_config = false;
  // (Boost takes an unambiguous start of an option's name for it, as --eval.ru or --conf: so is it taken here.)
  const auto names = [](const std::string& a, const std::string& option, std::size_t shortest) {
    const std::string name = a.substr(0, a.find('='));
    return name.size() >= shortest && option.rfind(name, 0) == 0;
  };
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (names(a, "--config", 4)) has_config = true;
    if (!names(a, "--eval.run", 8)) continue;
    if (a.find('=') != std::string::npos) {
      run_dir = a.substr(a.find('=') + 1);
    } else if (i + 1 < args.size()) {
      run_dir = args[i + 1];
    }
  }
  if (!run_dir.empty()) {
    if (has_config) {
      throw ConfigError("eval.run: stands for --config " + run_dir +
                        "/config.ini (and the run's model.csv): give --eval.run or --config, not both");
    }
    const std::string config = (fs::path(run_dir) / "config.ini").string();
    if (!fs::is_regular_file(config)) {
      throw ConfigError("eval.run: " + run_dir + " is not a run directory (it has no config.ini)");
    }
    args.insert(args.end(), {"--config", config});
  }
  std::vector<const char*> argv2;
  for (const auto& a : args) argv2.push_back(a.c_str());
  const int argc2 = static_cast<int>(argv2.size());
  auto job = job_named(find_job_name(argc2, argv2.data()));
  po::options_description eval_desc("eval options");
  eval_desc.add_options()("eval.run", po::value<std::string>()->default_value(""),
                          "a run directory: its config.ini as the job file (the command line's options win) and its "
                          "model.csv as eval.model")(
      "eval.model", po::value<std::string>()->default_value(""),
      "the model file (index,weight lines, as a run's model.csv); default: eval.run's model.csv")(
      "eval.split", po::value<std::string>()->default_value("holdout"),
      "holdout (the held-out examples a run with these options scores: a file's last learn.holdout) | all (every "
      "example of the data: a test file)");
  po::options_description accepted;
  accepted.add(eval_desc).add(afs::cli::controller_options());
  po::variables_map vm;
  const auto opts = afs::cli::parse_run(argc2, argv2.data(), job.get(), vm, &accepted);
  std::string evaluators;
  for (const auto& [n, make] : jobs()) {
    if (make()->evaluates_models()) evaluators += (evaluators.empty() ? "" : ", ") + n;
  }
  if (vm.count("help")) {
    std::cout << "usage: afstream eval --eval.run DIR [--learn.* data options] [--eval.split holdout|all]\n"
                 "       afstream eval --job NAME --eval.model FILE [the job's options] [--config FILE]\n"
                 "Scores a trained model (jobs: "
              << evaluators
              << ") on data, as a run scores its held-out examples, and prints the scores as CSV (examples, "
                 "loss, accuracy: the prediction rate, nan for regression; l1_to_true: the L1 distance to the true "
                 "model of generated dense data, else nan). The data are the ones the options name: with --eval.run "
                 "the run's own (its held-out examples, the same scores as its learn.csv) unless data options are "
                 "given, such as --learn.data file --learn.file TEST --learn.format libsvm --eval.split all. The "
                 "model's shape (task, features, classes) must be the data's: options that change it are the ones "
                 "it was trained with.\n\n"
              << eval_desc << "\n";
    if (job) std::cout << job_options(*job) << "\n";
    return 0;
  }
  if (!job)
    throw ConfigError("job: missing --job or --eval.run (afstream eval scores the models of: " + evaluators + ")");
  if (!job->evaluates_models()) {
    throw ConfigError("job: " + job->name() +
                      " writes no model that afstream eval could score (it scores those of: " + evaluators + ")");
  }
  if (!opts.out_dir.empty()) throw ConfigError("out: afstream eval prints its scores (redirect them to a file)");
  std::string model = vm["eval.model"].as<std::string>();
  if (model.empty() && !run_dir.empty()) model = (fs::path(run_dir) / "model.csv").string();
  if (model.empty()) throw ConfigError("eval.model: missing (the model file to score; or --eval.run DIR)");
  const std::string split = vm["eval.split"].as<std::string>();
  if (split != "holdout" && split != "all") {
    throw ConfigError("eval.split: expected holdout or all, got '" + split + "'");
  }
  for (const auto& o : opts.unused_by_job) std::cerr << "afstream eval: note: " << o << "\n";
  const afs::ModelEvaluation e = job->evaluate_model(vm, model, split == "all");
  // --quiet of eval's own command line (a run's config.ini holds the run's).
  const bool quiet =
      std::any_of(args.begin() + 1, args.end(), [](const std::string& a) { return a == "--quiet" || a == "-q"; });
  if (!quiet) std::cerr << "afstream eval: " << model << " on " << e.examples << "\n";
  std::string header;
  std::ostringstream values;
  values.precision(10);
  for (const auto& [name, value] : e.scores) {
    header += (header.empty() ? "" : ",") + name;
    values << (values.tellp() > 0 ? "," : "") << value;
  }
  std::cout << header << "\n" << values.str() << "\n";
  return 0;
}

// `afstream keygen`: a CURVE keypair as two files (afstream/net/curve.h). The public key goes to stdout.
int cmd_keygen(int argc, const char* const* argv) {
  po::variables_map vm;
  const auto k = afs::cli::parse_keygen(argc, argv, vm);
  if (vm.count("help")) {
    std::cout << "usage: afstream keygen --out DIR [--name NAME]\n\n" << afs::cli::keygen_options() << "\n";
    return 0;
  }
  const auto keys = afs::net::generate_curve_keypair();
  const auto files = afs::net::write_curve_keypair(k.out, k.name, keys);
  std::cerr << "afstream keygen: wrote " << files.secret_file << " (the secret key: keep it on this host, mode 0600; "
            << "give it to this host's processes with --net.curve-secret) and " << files.public_file
            << " (the public key: copy it into the net.curve-authorized directory of every host of the job)"
            << std::endl;
  std::cout << keys.public_key << "\n";
  return 0;
}

// State backups of large operators allocate and free buffers of megabytes many times a second (a 2^18-weight
// learner: 2-4 MB per backup). glibc maps and unmaps such blocks, or trims its heaps once they are free, so every
// backup faulted its pages in afresh. Kept in the heap (blocks up to 32 MB, glibc's largest threshold; heaps never
// trimmed), the KDD-like learner with a backup every 4096 examples went from 84% to 89% of mode none's throughput
// (5 rounds interleaved, `--job learn --learn.data kdd --items 1000000 --ft.replay-items-max 4096
// --net.in-flight-max 16384`); plain approx (92-93%) and heavy hitters did not move. The price: the process keeps
// its peak heap.
void keep_large_blocks_in_the_heap() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
}

// For "unrecognised option '--NAME'": the jobs that have such an option, when it is not this command's job's
// (`--learn.workers` is the ps job's, `--learn.parallelism` the learn job's): " (an option of the ps job; this
// command's job is learn)". "" otherwise.
std::string option_hint(const std::string& what, int argc, const char* const* argv) {
  static const std::string head = "unrecognised option '--";
  const auto at = what.find(head);
  if (at == std::string::npos) return "";
  const auto end = what.find('\'', at + head.size());
  if (end == std::string::npos) return "";
  const std::string name = what.substr(at + head.size(), end - at - head.size());
  std::string current;
  try {
    current = find_job_name(argc - 1, argv + 1);
  } catch (...) {
  }
  std::vector<std::string> owners;
  for (const auto& [job_name, make] : jobs()) {
    if (job_name == current) continue;
    po::options_description o;
    make()->add_options(o);
    if (o.find_nothrow(name, false) != nullptr) owners.push_back(job_name);
  }
  if (owners.empty()) return "";
  std::string list;
  for (std::size_t i = 0; i < owners.size(); ++i) {
    list += (i == 0 ? "" : i + 1 == owners.size() ? " and " : ", ") + owners[i];
  }
  return " (an option of the " + list + (owners.size() > 1 ? " jobs" : " job") +
         (current.empty() ? std::string(")") : "; this command's job is " + current + ")");
}

// What to look at when an error comes from a limit of this process (ZeroMQ, RocksDB and fork say only "Too many open
// files" or "Resource temporarily unavailable").
std::string limit_hint(const std::string& what) {
  const auto limit = [](int resource) {
    rlimit l{};
    if (::getrlimit(resource, &l) != 0 || l.rlim_cur == RLIM_INFINITY) return std::string("unlimited");
    return std::to_string(l.rlim_cur);
  };
  if (what.find("Too many open files") != std::string::npos) {
    return " (this process may open " + limit(RLIMIT_NOFILE) +
           " files: ulimit -n; each process of a run holds a few per worker it talks to)";
  }
  if (what.find("fork: Resource temporarily unavailable") != std::string::npos) {
    return " (this user may run " + limit(RLIMIT_NPROC) +
           " processes: ulimit -u; a run on processes starts one per worker, a backup server and a fork server)";
  }
  return "";
}

int main(int argc, char** argv) {
  // A standard descriptor closed by the caller (2>&-) would be the next file opened: metrics.jsonl got the progress
  // lines, and the processes started (which inherit 0-2) wrote into ZeroMQ's eventfds or RocksDB's LOG. /dev/null.
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      const int null = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
      if (null >= 0 && null != fd) {
        ::dup2(null, fd);
        ::close(null);
      }
    }
  }
  // Every process of a run holds a few dozen sockets and files (a source of 13 workers: 51); a soft limit below the
  // hard one (ulimit -Sn 32) ended in libzmq aborts. The soft limit is raised to the hard one (the processes this one
  // starts inherit it).
  if (rlimit files{}; ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &files);
  }
  keep_large_blocks_in_the_heap();
  try {
    if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
      usage();
      return argc < 2 ? 2 : 0;
    }
    const std::string cmd = argv[1];
    if (cmd == "--version" || cmd == "version") {
      std::cout << "afstream " << AFS_GIT_REVISION << "\n";
      return 0;
    }
    if (cmd == "run") return cmd_run(argc - 1, argv + 1, false);
    if (cmd == "controller") return cmd_run(argc - 1, argv + 1, true);
    if (cmd == "list") return cmd_list(argc);
    if (cmd == "backup-server") return cmd_backup_server(argc - 1, argv + 1);
    if (cmd == "worker") return cmd_worker(argc - 1, argv + 1);
    if (cmd == "keygen") return cmd_keygen(argc - 1, argv + 1);
    if (cmd == "gen") return cmd_gen(argc - 1, argv + 1);
    if (cmd == "eval") return cmd_eval(argc - 1, argv + 1);
    throw ConfigError("unknown command '" + cmd +
                      "' (expected run, controller, worker, list, gen, eval, backup-server, keygen or --version)");
  } catch (const std::bad_alloc&) {
    std::cerr
        << "afstream: error: out of memory (std::bad_alloc): the job asked for more memory than this process "
           "may have; large models (learn.hash-bits), sketches (hh.width x hh.depth), key spaces (hh.keys, join.keys, "
           "distinct.keys: the Zipf generators' tables take about 20 bytes a key) or input files need it\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "afstream: error: " << e.what() << limit_hint(e.what()) << option_hint(e.what(), argc, argv) << "\n";
    return 2;
  }
}
