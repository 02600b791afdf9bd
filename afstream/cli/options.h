// The single place where the command line's options are declared (DESIGN 7): dotted names that mean what they
// say, the paper's letters as aliases, the same keys in a job file (INI) and on the command line (command line
// wins). Turns them into a RunConfig; also the options of `afstream backup-server`.
#pragma once

#include <boost/program_options.hpp>
#include <string>

#include "afstream/runtime/config.h"
#include "afstream/runtime/job.h"
#include "afstream/runtime/worker_process.h"

namespace afs::cli {

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
  int heartbeat_ms = 100;
  int heartbeat_timeout_ms = 5000;
  RunConfig config;
};

// Options shared by every job (ft.*, fail.*, net.*, items, seed, out, ...).
boost::program_options::options_description run_options();

// Parses argv (after the subcommand) with the job's own options; throws ConfigError on unknown options or bad
// values, naming them. Returns the options and fills vm (for the job's own keys).

// extra: more options accepted besides run's and the job's (the worker subcommand's worker.* options).
RunOptions parse_run(int argc, const char* const* argv, const Job* job, boost::program_options::variables_map& vm,
                     const boost::program_options::options_description* extra = nullptr);

// `afstream worker`: the options its controller passes (worker.*), on top of run's and the job's.
boost::program_options::options_description worker_options();
WorkerProcessOptions parse_worker(const boost::program_options::variables_map& vm);

// `afstream backup-server`: where to listen and which store to serve.
struct BackupServerArgs {
  std::string listen = "tcp://127.0.0.1:5560";
  std::string store = "rocksdb";  // memory | rocksdb
  std::string store_path;         // rocksdb: the store's directory (created if missing)
  bool store_sync = false;        // rocksdb: fsync every put
};

boost::program_options::options_description backup_server_options();

// Parses argv (after the subcommand); throws ConfigError naming the bad option or value (unknown option, unknown
// store, rocksdb without store.path, store.path or store.sync with the memory store).
BackupServerArgs parse_backup_server(int argc, const char* const* argv, boost::program_options::variables_map& vm);

// key = value lines of every option that has a value, for printing and for <out>/config.ini.
std::string effective_config(const boost::program_options::variables_map& vm);

}  // namespace afs::cli
