// Package golangci is retryvet as a golangci-lint module plugin: a
// custom golangci-lint built with it (golangci-lint custom) runs retryvet
// beside the other linters, configured in .golangci.yml.
//
// The build file, .custom-gcl.yml:
//
//	version: v2.15.0
//	plugins:
//	  - module: github.com/retryhttp/retryhttp/retryvet
//	    import: github.com/retryhttp/retryhttp/retryvet/golangci
//	    version: latest # or a version of the retryvet module
//
// and .golangci.yml:
//
//	version: "2"
//	linters:
//	  enable:
//	    - retryvet
//	  settings:
//	    custom:
//	      retryvet:
//	        type: module
//	        description: retries that can repeat a side effect
//	        settings:
//	          show-ignored: false
//	          key-headers: [Idempotency-Key, X-Dedupe-Token] # the defaults' place
//
// Then golangci-lint custom builds ./custom-gcl, and ./custom-gcl run
// ./... reports what retryvet reports. The files in example/ are these,
// and the package's tests build golangci-lint with them.
package golangci

import (
	"fmt"
	"strings"

	"github.com/golangci/plugin-module-register/register"
	"golang.org/x/tools/go/analysis"

	"github.com/retryhttp/retryhttp/retryvet"
)

func init() { register.Plugin("retryvet", New) }

// Settings are the plugin's settings, under settings in its
// .golangci.yml entry.
type Settings struct {
	// ShowIgnored also reports the findings a //retryvet:ignore
	// directive silences, with its reason (retryvet's -show-ignored).
	ShowIgnored bool `json:"show-ignored"`
	// KeyHeaders are the headers a server dedupes on (retryvet's
	// -key-headers); empty means retryvet.DefaultKeyHeaders.
	KeyHeaders []string `json:"key-headers"`
	// KeyFields are the JSON body fields a server dedupes on (retryvet's
	// -key-fields); empty means retryvet.DefaultKeyFields.
	KeyFields []string `json:"key-fields"`
}

// New is the plugin's constructor, with the signature golangci-lint's
// plugin register expects: settings are .golangci.yml's, decoded into
// Settings; an unknown setting is an error.
func New(settings any) (register.LinterPlugin, error) {
	s, err := register.DecodeSettings[Settings](settings)
	if err != nil {
		return nil, fmt.Errorf("retryvet: %w", err)
	}
	return plugin{s}, nil
}

type plugin struct{ settings Settings }

// BuildAnalyzers returns retryvet, with its flags set from the settings.
func (p plugin) BuildAnalyzers() ([]*analysis.Analyzer, error) {
	headers, fields := retryvet.DefaultKeyHeaders, retryvet.DefaultKeyFields
	if len(p.settings.KeyHeaders) > 0 {
		headers = strings.Join(p.settings.KeyHeaders, ",")
	}
	if len(p.settings.KeyFields) > 0 {
		fields = strings.Join(p.settings.KeyFields, ",")
	}
	for flag, v := range map[string]string{"show-ignored": fmt.Sprint(p.settings.ShowIgnored), "key-headers": headers, "key-fields": fields} {
		if err := retryvet.Analyzer.Flags.Set(flag, v); err != nil {
			return nil, err
		}
	}
	return []*analysis.Analyzer{retryvet.Analyzer}, nil
}

// GetLoadMode asks for type information: retryvet's rules read types.
func (plugin) GetLoadMode() string { return register.LoadModeTypesInfo }
