"""Run TraceLens' perf model on a trace; write one CSV row per modelled CPU op event:
name, External id, Input Dims (JSON), GFLOPS, Data Moved (MB), Kernel Time (us), and copy_us: the part of
its GPU events that are memcpy or memset (outside traceforge's kernel time)."""
import json
import sys

from TraceLens.TreePerf.tree_perf import TreePerfAnalyzer

path, out = sys.argv[1], sys.argv[2]
a = TreePerfAnalyzer.from_file(path)
df = a.build_df_unified_perf_table()
keep = df[df["has_perf_model"] == True].copy()
def dims(v):
    def lst(o): return [lst(x) for x in o] if isinstance(o, (list, tuple)) else o
    return json.dumps(lst(v), separators=(",", ":"))
keep["dims"] = keep["Input Dims"].map(dims)
keep["copy_us"] = keep["kernel_details"].map(
    lambda ks: sum(k["dur"] for k in ks or [] if str(k["name"]).startswith(("Memcpy", "Memset"))))
cols = ["name", "External id", "dims", "GFLOPS", "Data Moved (MB)", "Kernel Time (µs)", "copy_us", "op category"]
keep[[c for c in cols if c in keep.columns]].to_csv(out, index=False)
print(len(df), "events,", len(keep), "with a perf model;", "kernel time with a model (us):", keep["Kernel Time (µs)"].sum())
