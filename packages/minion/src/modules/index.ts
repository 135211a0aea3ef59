export type {
  Grains,
  JobContext,
  MasterChannel,
  MinionOpts,
  ModuleContext,
  ModuleDefinition,
  ModuleFunction,
  ModuleFunctionSpec,
  ModuleRegistry,
  ScheduleControl,
} from './types.js'
export { BUILTIN_MODULES, createModuleRegistry } from './registry.js'
export { RunningJobs } from './running-jobs.js'
export type { RunningJobInfo, RunningJobLoad } from './running-jobs.js'
export { bindArguments, cleanKwargs, fnmatch, loadArgsAndKwargs, parseInput, parseKwarg, traverseDictAndList, yamlifyArg } from './args.js'
export { collectGrains, coreGrains, grainsFilePath, grainsModule, hostGrains, parseOsRelease, readPersistedGrains, replaceGrains } from './grains.js'
export { cmdModule, createCmdModule, DEFAULT_MAX_OUTPUT_BYTES, runCommand, shlexSplit } from './cmd.js'
export type { CmdModuleOptions, CommandResult, RunCommandOptions } from './cmd.js'
export { scriptFunctions } from './cmd-script.js'
export { cpModule, fileClientFor } from './cp.js'
export { testModule } from './test.js'
export { eventModule, minionEventTag } from './event.js'
export { scheduleModule } from './schedule.js'
export { saltutilModule } from './saltutil.js'
export { sysModule } from './sys.js'
export { brineVersion } from './version.js'
export { customModuleDirs, defineModule, definitionOf, extensionModulesDir, findModuleFiles, reloadCustomModules } from './loader.js'
export type { CustomFunction, CustomModule, LoadReport } from './loader.js'
export { syncModules, type SyncReport } from './sync.js'
export { fileModule } from './file.js'
export { findFiles, MAX_FIND_RESULTS } from './file-find.js'
export { chooseServiceProvider, debianProvider, serviceModule, systemdProvider, type ServiceProvider } from './service.js'
export { createPkgModule, defaultSourceResolver, packageChanges, pkgModule } from './pkg.js'
export type { InstallTarget, PackageList, PackageProvider, PackageSourceResolver } from './pkg.js'
export { aptProvider } from './pkg-apt.js'
export { dnfProvider } from './pkg-dnf.js'
export { groupModule, userModule } from './user.js'
export { diskModule } from './disk.js'
export { statusModule } from './status.js'
export { networkModule, procAddress } from './network.js'
export { environModule } from './environ.js'
