# Debian packages through CPack's DEB generator (`cpack -G DEB` in a build
# configured with CMAKE_INSTALL_PREFIX=/usr, as tests/packaging/deb_rootfs.sh
# does): the packages hold exactly what `cmake --install` puts down, so the
# layout, the man pages and the data paths are the ones the install tests
# already check, and no second description of the files (debian/*.install)
# can drift from the build. Dependencies come from dpkg-shlibdeps over the
# binaries; maintainer scripts live in packaging/deb.
#
#   ringmaster-agent    agent and CLI, the systemd unit and its settings,
#                       scenario catalog, topology data, docs, man pages,
#                       bash completion (component `agent`)
#   ringmaster-console  the console, its .desktop entry and icon (`console`)
#   ringmaster-dev      libringmaster, headers, CMake and pkg-config files
#                       (`engine`, `engine_dev`)

set(ringmaster_deb_dir ${PROJECT_SOURCE_DIR}/packaging/deb)

# The copyright file Debian wants in each package's doc directory.
foreach(package agent console dev)
  set(component ${package})
  if(package STREQUAL "dev")
    set(component engine_dev)
  endif()
  install(FILES ${ringmaster_deb_dir}/copyright DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/ringmaster-${package}
          COMPONENT ${component})
endforeach()

set(CPACK_PACKAGE_NAME ringmaster)
set(CPACK_PACKAGE_VENDOR "The Ringmaster authors")
set(CPACK_PACKAGE_CONTACT "Ringmaster maintainers <maintainers@ringmaster.invalid>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ONE_PER_GROUP)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_AGENT_PACKAGE_NAME ringmaster-agent)
set(CPACK_DEBIAN_AGENT_PACKAGE_SECTION net)
set(CPACK_DEBIAN_AGENT_DESCRIPTION
    "Ringmaster node agent and CLI for collective communication bring-up
 The agent runs collective benchmarks and rendezvous probes as an
 unprivileged user for the Ringmaster console and `ringmaster-cli remote`,
 with token authentication, optional TLS and opt-in fault injection.
 Includes ringmaster-cli (perf, probe, store, topo, tune, repro), the
 systemd unit, the scenario catalog and topology files.")
# adduser makes the rank user; libfabric is opened at run time (dlopen),
# nftables and iproute2 carry out injected faults.
set(CPACK_DEBIAN_AGENT_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_AGENT_PACKAGE_RECOMMENDS "libfabric1, nftables, iproute2")
set(CPACK_DEBIAN_AGENT_PACKAGE_CONTROL_EXTRA
    ${ringmaster_deb_dir}/postinst ${ringmaster_deb_dir}/prerm ${ringmaster_deb_dir}/postrm)
set(CPACK_DEBIAN_AGENT_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_CONSOLE_PACKAGE_NAME ringmaster-console)
set(CPACK_DEBIAN_CONSOLE_PACKAGE_SECTION net)
set(CPACK_DEBIAN_CONSOLE_DESCRIPTION
    "Ringmaster operations console (Qt 6)
 Shows a cluster's discovered topology, live per-channel bandwidth, the
 algorithm and protocol the engine picked and the rendezvous stage where a
 job breaks; launches collective benchmarks and connectivity scenarios on
 the nodes' agents.")
# The console starts local agents and ranks from the agent package.
set(CPACK_DEBIAN_CONSOLE_PACKAGE_DEPENDS "ringmaster-agent (= ${PROJECT_VERSION})")
# The history's Qt SQL drivers are plugins: SQLite (the default) and
# PostgreSQL (a team's server, --history postgresql://...).
set(CPACK_DEBIAN_CONSOLE_PACKAGE_RECOMMENDS "libqt6sql6-sqlite")
set(CPACK_DEBIAN_CONSOLE_PACKAGE_SUGGESTS "libqt6sql6-psql")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME ringmaster-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "Ringmaster collective communication engine (library and headers)
 libringmaster with its C++ headers, a CMake package (find_package(Ringmaster))
 and a pkg-config file.")

include(CPack)
cpack_add_component_group(agent)
cpack_add_component_group(console)
cpack_add_component_group(dev)
cpack_add_component(agent GROUP agent)
cpack_add_component(console GROUP console)
cpack_add_component(engine GROUP dev)
cpack_add_component(engine_dev GROUP dev)
