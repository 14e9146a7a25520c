set -x
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
which ncu; ncu --version; ls /opt/nvidia/nsight-compute/; ls /opt/nvidia/nsight-compute/*/extras/python
python3 -c "import torch, triton, pandas, typer, numpy; print(torch.__version__, triton.__version__, pandas.__version__, typer.__version__, numpy.__version__, torch.version.cuda)"
python3 -c "import ncu_report, plotly; print('ncu_report ok', plotly.__version__)"
M="gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum,smsp__sass_data_bytes_mem_global_op_ld.sum,smsp__sass_data_bytes_mem_global_op_st.sum,smsp__sass_thread_inst_executed_op_fadd_pred_on.sum,smsp__sass_thread_inst_executed_op_fmul_pred_on.sum,smsp__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__cycles_elapsed.avg.per_second,dram__bytes.sum.peak_sustained,dram__cycles_elapsed.avg.per_second"
time ncu --metrics $M --nvtx --nvtx-include "regex:^mt\|.*/" --import-sass no --cache-control all --clock-control none -f -o $OUT/probe python3 probe/probe_app.py 2>&1 | tail -30
ncu --import probe_nonexist.ncu-rep 2>&1 | tail -2
time ncu --metrics gpu__time_duration.sum,bogus__metric.sum -f -o $OUT/bad python3 probe/probe_app.py 2>&1 | tail -5
echo rc=$?
ncu --query-metrics-mode suffix --metrics l1tex__t_bytes_pipe_lsu_mem_global_op_ld --chip gh100 2>&1 | head -5
python3 -c "
import ncu_report as n
r=n.load_report('$OUT/probe.ncu-rep')
print('ranges',r.num_ranges())
for i in range(r.num_ranges()):
  rg=r.range_by_idx(i)
  for j in range(rg.num_actions()):
    a=rg.action_by_idx(j)
    st=a.nvtx_state()
    doms=[ (d, st.domain_by_id(d).name(), list(st.domain_by_id(d).push_pop_ranges())) for d in st.domains()]
    print(i,j,a.name(),doms)
    for m in ['gpu__time_duration.sum','l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum','dram__bytes_read.sum','device__attribute_display_name','launch__grid_size']:
      x=a.metric_by_name(m)
      print('   ',m, None if x is None else (x.value(), x.unit(), x.metric_type()))
    print('   names', len(a.metric_names()), sorted(a.metric_names())[:8])
"
