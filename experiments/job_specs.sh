# The jobs the experiment scripts compare, one line each: label | job arguments | approx setting A | approx setting B.
# Sourced by jobs_table.sh and instructions.sh (one list, so the two measure the same jobs with the same settings).
# Labels are CSV fields: no commas (jobs_table.sh refuses one).
#
# The paper's settings are (Theta 1e5, L 1e3) and (Theta 1e4, L 100), with Gamma 1e3. Theta is in the units of the
# job's divergence, so the settings are the paper's where those units make them meaningful (bytes for heavy hitters,
# bids for NEXMark, samples for the join) and scaled where they do not: HyperLogLog registers hold ranks (at most
# 64 - p + 1), so a Theta of 1e5 ranks would protect nothing (the distinct job refuses it); it runs at Theta 8 / 4.
# The learners' divergence is the L2 distance of the weights: the paper's LR settings (Theta 10, L 1e3) and
# (Theta 1, L 100). Word count and grep read a generated corpus of TEXT_BYTES (written once under TMPDIR).
job_spec() {
  local text_mb=$((${TEXT_BYTES:-100000000} / 1000000))
  case "$1" in
    hh) echo "heavy-hitters (Count-Min)|--job heavy-hitters|--ft.theta 1e5 --ft.l 1e3|--ft.theta 1e4 --ft.l 100" ;;
    ss) echo "heavy-hitters (Space-Saving)|--job heavy-hitters --hh.algorithm space-saving|--ft.theta 1e5 --ft.l 1e3|--ft.theta 1e4 --ft.l 100" ;;
    nexmark) echo "nexmark-hot-items|--job nexmark-hot-items|--ft.theta 1e5 --ft.l 1e3|--ft.theta 1e4 --ft.l 100" ;;
    join) echo "join (ripple join; 10% sample)|--job join|--ft.theta 1e5 --ft.l 1e3|--ft.theta 1e4 --ft.l 100" ;;
    distinct) echo "distinct (HyperLogLog)|--job distinct|--ft.theta 8 --ft.l 1e3|--ft.theta 4 --ft.l 100" ;;
    wordcount) echo "wordcount ($text_mb MB generated corpus)|--job wordcount --text.synthetic-bytes ${TEXT_BYTES:-100000000}|--ft.theta 1e5 --ft.l 1e3|--ft.theta 1e4 --ft.l 100" ;;
    grep) echo "grep ($text_mb MB generated corpus)|--job grep --text.synthetic-bytes ${TEXT_BYTES:-100000000}|--ft.theta 1e5 --ft.l 1e3|--ft.theta 1e4 --ft.l 100" ;;
    learn-higgs) echo "learn (logistic SGD; HIGGS-like dense 28)|--job learn --learn.data higgs|--ft.theta 10 --ft.l 1e3|--ft.theta 1 --ft.l 100" ;;
    learn-kdd) echo "learn (logistic SGD; KDD-like sparse 2^18)|--job learn --learn.data kdd|--ft.theta 10 --ft.l 1e3|--ft.theta 1 --ft.l 100" ;;
    *) echo "unknown job '$1' (expected hh, ss, nexmark, join, distinct, wordcount, grep, learn-higgs, learn-kdd)" >&2; return 2 ;;
  esac
}

# The configurations a job is compared in, one per line (name | afstream run arguments), given its two approx
# settings: none, approx at each, exact.
job_configs() {
  printf '%s\n' "none|--ft.mode none" "approx A|--ft.mode approx $1 --ft.gamma 1e3" \
    "approx B|--ft.mode approx $2 --ft.gamma 1e3" "exact|--ft.mode exact"
}
