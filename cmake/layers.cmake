# The layers of src/ and include/recall/, lowest first, and the layers each one links directly.
# A layer may use what the layers it links use, and nothing else: CMakeLists.txt links them so
# (shared libraries with --no-undefined, so a call into any other layer fails to link), and
# cmake/check_layers.cmake fails the build on an #include of any other layer.
#   core         what everything needs: errors, io, threads, seeds, the machine, signals, children
#   formats      other programs' files: torch.save (read and written), safetensors, gnuplot plots
#   ops          the kernels, each beside its reference: GEMMs (fp32, bf16), row maths, causal
#                attention, LayerNorm, AdamW, the probe's tiles, normal draws; the kernel switch
#   stores       memory stores and their theory
#   models       the transformer built from them
#   train        tasks, the trainer, checkpoints, import and export (and the configs of other
#                programs' models, which only they read)
#   analysis     measurements: probe, fit, inspect, extrapolation, attention statistics
#   experiments  what trains and schedules runs: the experiments, the report, sweeps, benchmarks
#   cli          the commands
set(RECALL_LAYERS core formats ops stores models train analysis experiments)
set(RECALL_LINKS_core "")
set(RECALL_LINKS_formats core)
set(RECALL_LINKS_ops core)
set(RECALL_LINKS_stores ops)
set(RECALL_LINKS_models stores)
set(RECALL_LINKS_train models formats)
set(RECALL_LINKS_analysis train)
set(RECALL_LINKS_experiments analysis)
set(RECALL_LINKS_cli experiments)

# recall_layer_closure(<layer> <out>): the layer and every layer it reaches through its links.
function(recall_layer_closure layer out)
  set(seen ${layer})
  set(todo ${RECALL_LINKS_${layer}})
  while(todo)
    list(POP_FRONT todo next)
    if(NOT next IN_LIST seen)
      list(APPEND seen ${next})
      list(APPEND todo ${RECALL_LINKS_${next}})
    endif()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()
