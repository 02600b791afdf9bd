// The single place where the command line's options are declared (DESIGN 7): dotted names that mean what they
// say, the paper's letters as aliases, the same keys in a job file (INI) and on the command line (command line
// wins). Turns them into a RunConfig; also the options of `afstream backup-server`. The CURVE options (net.curve-*)
// are one group, declared once here and given to every subcommand that opens sockets.
#pragma once

#include <boost/program_options.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "afstream/ft/compactor.h"
#include "afstream/net/curve.h"
#include "afstream/runtime/config.h"
#include "afstream/runtime/job.h"
#include "afstream/runtime/process_cluster.h"
#include "afstream/runtime/worker_process.h"

namespace afs::cli {

// CURVE on tcp:// (afstream/net/curve.h): net.curve-secret FILE (this process's keypair) and net.curve-authorized
// DIR|FILE (the public keys let in; a process always lets in its own key too). Part of run_options() (run,
// controller, worker) and backup_server_options().
boost::program_options::options_description curve_options();
struct CurveArgs {
  std::optional<net::CurveConfig> config;  // unset: CURVE off
  std::vector<std::string> args;           // the two options, with absolute paths, to pass on to processes started here
};
// Reads and checks the key files. Throws ConfigError naming the option and the file.
CurveArgs parse_curve(const boost::program_options::variables_map& vm);

struct RunOptions {
  std::string job;
  std::string out_dir;
  std::string runtime = "threads";
  std::uint64_t items = 0;
  std::uint64_t seed = 0;
  bool quiet = false;
  int fail_count = 0;
  std::string fail_target;
  std::string fail_at;
  int fail_random = 0;
  std::vector<std::pair<std::string, std::string>> fail_domains;  // name -> worker ids
  std::string process_store = "rocksdb";                          // runtime processes: the backup server's store
  // ... and its --store.compact-ratio
  double process_store_compact_ratio = afs::ProcessClusterOptions{}.store_compact_ratio;
  int process_standby = afs::ProcessClusterOptions{}.standby;           // runtime processes: spare worker processes
  bool process_fork_server = afs::ProcessClusterOptions{}.fork_server;  // runtime processes: restarts forked
  bool process_local_recovery = afs::ProcessClusterOptions{}.local_recovery;  // runtime processes: local copies
  int heartbeat_ms = 100;
  int heartbeat_timeout_ms = 5000;
  int start_timeout_ms = static_cast<int>(afs::ProcessClusterOptions{}.start_timeout.count());
  CurveArgs curve;
  RunConfig config;
  // Options given on the command line that the chosen ft.mode does not use, each as "--KEY (MODE only)": the
  // command-line layer notes them (they are accepted: one command may be rerun in several modes).
  std::vector<std::string> unused_by_mode;
  // The job's options given on the command line that its other options leave without effect, each as
  // "--KEY has no effect (WHY)" (Job::unused_options): noted too.
  std::vector<std::string> unused_by_job;
  // The same for the process runtime's options (process.*) given with --runtime threads: "--KEY has no effect (...)".
  std::vector<std::string> unused_by_runtime;
};

// Options shared by every job (ft.*, fail.*, net.*, items, seed, out, ...).
boost::program_options::options_description run_options();

// Parses argv (after the subcommand) with the job's own options; throws ConfigError on unknown options or bad
// values, naming them. Returns the options and fills vm (for the job's own keys).

// extra: more options accepted besides run's and the job's (the worker subcommand's worker.* options).
RunOptions parse_run(int argc, const char* const* argv, const Job* job, boost::program_options::variables_map& vm,
                     const boost::program_options::options_description* extra = nullptr);

// `afstream worker`: the options its controller passes (worker.*), on top of run's and the job's. parse_worker
// leaves WorkerProcessOptions::curve to the caller (RunOptions::curve) and reads the servers' keys.
boost::program_options::options_description worker_options();
WorkerProcessOptions parse_worker(const boost::program_options::variables_map& vm);

// `afstream worker` with no --job: a worker started by hand that registers with its controller and takes the job's
// options from it (afstream/runtime/registration.h). Only worker.* and net.curve-* options are accepted.
struct RegisteringWorkerArgs {
  int worker = 0;
  std::string controller;  // checked
  std::chrono::milliseconds controller_timeout{10000};
  std::vector<std::string> given;  // the options as given (passed on to the worker it becomes)
  bool has_bind = false, has_directory = false, has_store = false, has_heartbeat = false, has_store_key = false;
  std::optional<net::CurveClient> curve;  // CURVE: this worker's keypair and the controller's public key
};
RegisteringWorkerArgs parse_registering_worker(int argc, const char* const* argv);

// `afstream controller`: where the controller binds, which workers it waits for, which backup server it uses.
boost::program_options::options_description controller_options();
struct ControllerArgs {
  std::string bind;  // tcp://IP[:PORT], checked
  std::vector<int> remote_workers;
  std::string backup_server;      // "" or a checked endpoint
  std::string backup_server_key;  // CURVE: its public key (Z85), "" if not given
  int register_timeout_ms = 300000;
};
// worker_count: to check the remote workers' ids.
ControllerArgs parse_controller(const boost::program_options::variables_map& vm, int worker_count);

// The options in vm that were given (on the command line or in a job file), as --key=value arguments, except those
// whose key starts with one of `skip`: the job's options as a controller passes them to its workers.
std::vector<std::string> effective_args(const boost::program_options::variables_map& vm,
                                        const std::vector<std::string>& skip);

// `afstream backup-server`: where to listen and which store to serve.
struct BackupServerArgs {
  std::string listen = "tcp://127.0.0.1:5560";
  std::string store = "rocksdb";  // memory | rocksdb
  std::string store_path;         // rocksdb: the store's directory (created if missing)
  bool store_sync = false;        // rocksdb: fsync every put
  bool quiet = false;             // no lines at the start (a `run --quiet` starts its server so)
  std::string endpoint_file;      // written with the bound endpoint once listening (port 0: the one chosen)
  std::string local_dir;          // the workers' local copies on this host (BackupServerOptions::local_dir)
  std::vector<std::string> remove_if_orphaned;  // removed when it stops once the process that started it has ended
  double compact_ratio = afs::CompactionPolicy{}.delta_ratio;  // compaction (afstream/ft/compactor.h); 0: off
  std::uint64_t compact_deltas = afs::CompactionPolicy{}.max_deltas;
  CurveArgs curve;
};

boost::program_options::options_description backup_server_options();

// Parses argv (after the subcommand); throws ConfigError naming the bad option or value (unknown option, unknown
// store, rocksdb without store.path, store.path or store.sync with the memory store).
BackupServerArgs parse_backup_server(int argc, const char* const* argv, boost::program_options::variables_map& vm);

// `afstream keygen`: where to write a keypair (NAME.key, NAME.pub).
struct KeygenArgs {
  std::string out;
  std::string name = "afstream";
};
boost::program_options::options_description keygen_options();
KeygenArgs parse_keygen(int argc, const char* const* argv, boost::program_options::variables_map& vm);

// key = value lines of every option that has a value, for printing and for <out>/config.ini.
std::string effective_config(const boost::program_options::variables_map& vm);
// <out>/config.ini: effective_config's lines after one that says where the run was started, from which a job file
// read back (`run --config`, `eval --eval.run`) takes the relative paths of its options (afs::path_value).
std::string run_config_file(const std::string& effective);

// The lines of effective_config that make the job what it is (the job, its own options, items, seed, ft.*, net.*),
// the same in a controller and in every worker of its job: not the controller's, the worker's, the failure plan's,
// the process runtime's or the CURVE options, which differ between processes of one job. A worker says it in its
// hello, and its controller refuses one that differs (a worker started by hand with --job and other options).
std::string job_config(const boost::program_options::variables_map& vm);

}  // namespace afs::cli
